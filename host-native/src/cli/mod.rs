//! Argument parsing and dispatch of `toolnexus`.

mod agent;
mod card_cache;
mod demo;
mod log;
mod remote;
mod terminal;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "toolnexus",
    version,
    about = "Call A2A agents as tools, and serve skills as an A2A agent.",
    after_help = "Start with `toolnexus demo`: an offline round trip, no setup needed."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Export spans over OTLP/HTTP (protobuf) to this collector (its base
    /// URL; `/v1/traces` is appended). Default: OTEL_EXPORTER_OTLP_ENDPOINT
    /// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; unset, nothing is exported.
    #[cfg(feature = "otel")]
    #[arg(long, global = true, value_name = "URL")]
    otlp_endpoint: Option<String>,
}

// Parsed once per process: the size of its largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Print a remote agent's skills as a JSON array of tools.
    Tools {
        #[command(flatten)]
        remote: remote::Remote,
    },
    /// Run one skill of a remote agent; print {"output","isError","metadata"}.
    ///
    /// Exit 0 when isError is false, 2 when true, 1 when the card cannot be
    /// resolved or has no such tool. Ctrl-C or SIGTERM cancels the task.
    /// A question (state input-required or auth-required, exit 2) names its
    /// task in metadata.taskId and metadata.contextId: answer it with
    /// `--task-id ID --context-id ID`, the answer as the task text.
    Call {
        #[command(flatten)]
        remote: remote::Remote,
        /// The tool name (reviewer_review) or the skill id (review).
        tool: String,
        /// The task text, or - to read it from stdin.
        task: String,
        /// Upper bound of the interval between two polls in ms [default: 1000]
        #[arg(long, value_name = "MS")]
        poll_every: Option<u64>,
        /// Print each event of the task as one JSON line on stderr (A2A 0.3
        /// shape: kind task|status-update|artifact-update|message) as it happens.
        #[arg(long)]
        events: bool,
        /// Answer the question of this task (the `taskId` in the metadata of
        /// an input-required or auth-required result): the task text is the answer.
        #[arg(long, value_name = "ID")]
        task_id: Option<String>,
        /// Send the message in this conversation (the `contextId` in a result's metadata).
        #[arg(long, value_name = "ID")]
        context_id: Option<String>,
    },
    /// List a remote agent's tasks (A2A 1.0 ListTasks), newest status change
    /// first; print {"tasks": [{id, contextId, state, timestamp, output}], "totalSize"}.
    Tasks {
        #[command(flatten)]
        remote: remote::Remote,
        /// Only the tasks of this context.
        #[arg(long = "context", value_name = "ID")]
        context: Option<String>,
        /// Only the tasks in this state (completed, working, input-required, …).
        #[arg(long, value_name = "S")]
        status: Option<String>,
    },
    /// Serve skills (and the config's agents as tools) as an A2A agent.
    ///
    /// The first stdout line is "listening on http://HOST:PORT". Ctrl-C or
    /// SIGTERM stops it cleanly.
    Serve(agent::ServeArgs),
    /// Print the Agent Card a `serve` with these options would serve at URL.
    Card(agent::CardArgs),
    /// Offline demo: serve the bundled example skills with the echo model,
    /// resolve them with agentTools and run one task end to end.
    Demo,
}

/// A failure that ends the command: one line on stderr, then this exit code.
pub struct Fail(pub i32, pub String);

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
    log::install(match &cli.command {
        Command::Serve(args) => args.log_format,
        _ => None,
    });
    #[cfg(feature = "otel")]
    if let Err(e) = toolnexus_host_native::otel::init(cli.otlp_endpoint.as_deref(), "toolnexus") {
        eprintln!("toolnexus: {e}");
        return 1;
    }
    // A server wants every core; a one-shot command wants to start and stop
    // at once, and a single thread does that with less work.
    let runtime = match &cli.command {
        Command::Serve(_) | Command::Demo => tokio::runtime::Builder::new_multi_thread(),
        Command::Tools { .. } | Command::Call { .. } | Command::Tasks { .. } | Command::Card(_) => {
            tokio::runtime::Builder::new_current_thread()
        }
    }
    .enable_all()
    .build();
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("toolnexus: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Tools { remote } => remote::tools(remote).await,
            Command::Call {
                remote,
                tool,
                task,
                poll_every,
                events,
                task_id,
                context_id,
            } => {
                let refs = remote::MessageRefs {
                    task_id,
                    context_id,
                };
                remote::call(remote, tool, task, refs, poll_every, events).await
            }
            Command::Tasks {
                remote,
                context,
                status,
            } => remote::tasks(remote, context, status).await,
            Command::Serve(args) => agent::serve(args).await,
            Command::Card(args) => agent::card(args),
            Command::Demo => demo::run().await,
        }
    });
    // The spans still queued, exported before exit.
    #[cfg(feature = "otel")]
    toolnexus_host_native::otel::shutdown();
    // Don't wait for idle keep-alive connections or stray tasks at exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match outcome {
        Ok(code) => code,
        Err(Fail(code, message)) => {
            eprintln!("toolnexus: {}", terminal::line(&message));
            code
        }
    }
}
