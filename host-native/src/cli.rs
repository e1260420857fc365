//! Argument parsing and the subcommands of `toolnexus`.

use clap::{Parser, Subcommand};
use serde_json::json;
use std::io::Read;
use toolnexus_host_native::{agent_tools, Agent};

#[derive(Parser)]
#[command(
    name = "toolnexus",
    version,
    about = "Call A2A agents as tools, from the command line."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct Remote {
    /// The Agent Card URL, e.g. http://127.0.0.1:8080/.well-known/agent-card.json
    card: String,
    /// A request header "Name: value"; ${NAME} in the value expands from the environment. Repeatable.
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    headers: Vec<String>,
    /// Overall time limit in ms (card fetch, and the whole call) [default: 300000]
    #[arg(long, value_name = "MS")]
    timeout: Option<u64>,
}

#[derive(Subcommand)]
enum Command {
    /// Print a remote agent's skills as a JSON array of tools.
    Tools {
        #[command(flatten)]
        remote: Remote,
    },
    /// Run one skill of a remote agent; print {"output","isError","metadata"}.
    ///
    /// Exit 0 when isError is false, 2 when true, 1 when the card cannot be
    /// resolved or has no such tool. Ctrl-C or SIGTERM cancels the task.
    Call {
        #[command(flatten)]
        remote: Remote,
        /// The tool name (reviewer_review) or the skill id (review).
        tool: String,
        /// The task text, or - to read it from stdin.
        task: String,
        /// Upper bound of the interval between two polls in ms [default: 1000]
        #[arg(long, value_name = "MS")]
        poll_every: Option<u64>,
    },
}

/// A failure that ends the command: one line on stderr, then this exit code.
struct Fail(i32, String);

fn parse_header(h: &str) -> Result<(String, String), Fail> {
    match h.split_once(':') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_string(), value.trim().to_string()))
        }
        _ => Err(Fail(
            1,
            format!(
                "invalid header {:?}: expected \"Name: value\"",
                h.split(':').next().unwrap_or("")
            ),
        )),
    }
}

impl Remote {
    fn agent(&self, poll_every: Option<u64>) -> Result<Agent, Fail> {
        Ok(Agent {
            card: self.card.clone(),
            headers: self
                .headers
                .iter()
                .map(|h| parse_header(h))
                .collect::<Result<_, _>>()?,
            timeout: self.timeout,
            poll_every,
        })
    }
}

/// Completes on Ctrl-C or SIGTERM.
async fn interrupted() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

fn print_json(v: &serde_json::Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}

async fn tools(remote: Remote) -> Result<i32, Fail> {
    let agent = remote.agent(None)?;
    let tools = agent_tools(&agent)
        .await
        .map_err(|e| Fail(1, e.to_string()))?;
    print_json(&json!(tools.iter().map(|t| t.spec()).collect::<Vec<_>>()));
    Ok(0)
}

async fn call(
    remote: Remote,
    tool: String,
    task: String,
    poll_every: Option<u64>,
) -> Result<i32, Fail> {
    let agent = remote.agent(poll_every)?;
    let task = if task == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Fail(1, format!("cannot read the task from stdin: {e}")))?;
        text.strip_suffix('\n')
            .map(|t| t.strip_suffix('\r').unwrap_or(t))
            .unwrap_or(&text)
            .to_string()
    } else {
        task
    };
    let tools = agent_tools(&agent)
        .await
        .map_err(|e| Fail(1, e.to_string()))?;
    let Some(found) = tools
        .iter()
        .find(|t| t.spec().name == tool)
        .or_else(|| tools.iter().find(|t| t.skill() == tool))
    else {
        let names: Vec<&str> = tools.iter().map(|t| t.spec().name.as_str()).collect();
        return Err(Fail(
            1,
            format!(
                "the agent has no tool {tool:?} (it has: {})",
                names.join(", ")
            ),
        ));
    };
    let result = found
        .execute_with_abort(&json!({"task": task}), interrupted())
        .await;
    println!("{}", json!(result));
    Ok(if result.is_error { 2 } else { 0 })
}

/// Runs the CLI; returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version
            print!("{e}");
            return 0;
        }
        Err(e) => {
            // clap's message spans lines ("…not provided:\n  <TASK>\n\nUsage: …"); keep the first paragraph.
            let text = e.to_string();
            let first: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let first = first.join(" ");
            eprintln!(
                "toolnexus: {} (see toolnexus --help)",
                first.trim_start_matches("error: ")
            );
            return 1;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("toolnexus: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Tools { remote } => tools(remote).await,
            Command::Call {
                remote,
                tool,
                task,
                poll_every,
            } => call(remote, tool, task, poll_every).await,
        }
    });
    match outcome {
        Ok(code) => code,
        Err(Fail(code, message)) => {
            eprintln!("toolnexus: {message}");
            code
        }
    }
}
