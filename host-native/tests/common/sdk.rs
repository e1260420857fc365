//! The official A2A SDK peers of `tests/peers` (Python `a2a-sdk`, npm
//! `@a2a-js/sdk`, installed by `bash tests/peers/setup.sh`): their echo
//! servers, and their client script run to the end with its one JSON line read.

use super::{free_port, repo_root, run_to_end_env, start_listening, Proc};
use serde_json::Value;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sdk {
    Python,
    Js,
}

/// Every way the client script sends a task: blocking, non-blocking and
/// streaming, each in 1.0 and in legacy 0.3.
pub const CLIENT_MODES: [&[&str]; 6] = [
    &[],
    &["--non-blocking"],
    &["--legacy"],
    &["--legacy", "--non-blocking"],
    &["--stream"],
    &["--legacy", "--stream"],
];

/// `tests/peers`.
pub fn peers() -> PathBuf {
    repo_root().join("tests/peers")
}

/// The program and leading arguments that run one of the peer scripts:
/// `tests/peers/<py>` under the venv's Python, or `tests/peers/<js>` under
/// Node. Fails, saying how to install them, when the peers are not installed.
pub fn peer_command(sdk: Sdk, py: &str, js: &str) -> (PathBuf, Vec<String>) {
    let python = peers().join(".venv/bin/python");
    assert!(
        python.exists() && peers().join("js/node_modules/@a2a-js/sdk").exists(),
        "the official SDK peers are not installed: run `bash tests/peers/setup.sh` (the README test command does)"
    );
    match sdk {
        Sdk::Python => (python, vec![peers().join(py).display().to_string()]),
        Sdk::Js => ("node".into(), vec![peers().join(js).display().to_string()]),
    }
}

/// The SDK's echo server on a free port (with `--compat-03`, the 0.3
/// transport too), once it says it is listening.
pub async fn official_server(sdk: Sdk, compat_03: bool) -> Proc {
    let flags: &[&str] = if compat_03 { &["--compat-03"] } else { &[] };
    official_server_with(sdk, flags).await
}

/// The SDK's echo server on a free port with these flags (`--compat-03`,
/// `--card-03`, `--rest-only`, `--tenant T`), once it says it is listening.
pub async fn official_server_with(sdk: Sdk, flags: &[&str]) -> Proc {
    let (program, mut args) = peer_command(sdk, "py_server.py", "js/server.mjs");
    args.extend(["--port".to_string(), free_port().to_string()]);
    args.extend(flags.iter().map(|f| f.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    start_listening(&program, &args).await
}

/// Runs the SDK's client script (`<card> <text> <extra…>`) to the end:
/// its exit code, the JSON object it printed (`null` if none), its stderr.
pub async fn official_client(
    sdk: Sdk,
    card: &str,
    text: &str,
    extra: &[&str],
) -> (i32, Value, String) {
    official_client_env(sdk, card, text, extra, &[]).await
}

/// [`official_client`] with these environment variables set (the
/// credentials its `--api-key-env` / `--bearer-env` name).
pub async fn official_client_env(
    sdk: Sdk,
    card: &str,
    text: &str,
    extra: &[&str],
    envs: &[(&str, &str)],
) -> (i32, Value, String) {
    let (program, mut args) = peer_command(sdk, "py_client.py", "js/client.mjs");
    args.extend([card.to_string(), text.to_string()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = run_to_end_env(&program, &args, envs).await;
    (
        code,
        serde_json::from_str(stdout.trim()).unwrap_or(Value::Null),
        stderr,
    )
}

/// The Python SDK's echo server with more options (`--auth-bearer TOKEN`,
/// `--auth-oauth ID:SECRET --oauth-ttl S`, …: see `py_server.py`).
pub async fn py_server_with(extra: &[&str]) -> Proc {
    let (program, mut args) = peer_command(Sdk::Python, "py_server.py", "js/server.mjs");
    args.extend(["--port".to_string(), free_port().to_string()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    start_listening(&program, &args).await
}
