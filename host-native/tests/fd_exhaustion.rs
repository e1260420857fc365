//! `toolnexus serve` out of file descriptors (issue 11 §5): under a low
//! `ulimit -n`, connections past what it can accept wait in the listen
//! backlog while every accept fails (EMFILE). The accept loop must back
//! off instead of spinning, and serve again once descriptors are freed.
//! (Idle connections would be closed to make room; these are busy.)
//!
//! CPU time is read from /proc/PID/stat as a count of clock ticks over a
//! window, with a generous bound: a spinning loop burns a whole core.

#![cfg(target_os = "linux")]

mod common;

use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The server's user + system CPU time so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // Fields after the command name (which may hold spaces), from field 3 on.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let field = |n: usize| fields[n - 3].parse::<u64>().expect("ticks");
    field(14) + field(15)
}

/// `GET /healthz` on a fresh connection; the status line, if one came
/// within `bound` (a bound for a broken server, not a speed).
async fn health(addr: &str, bound: Duration) -> Option<String> {
    let ask = async {
        let mut s = TcpStream::connect(addr).await.ok()?;
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await
            .ok()?;
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).await.ok()?;
        let answer = String::from_utf8_lossy(&answer).into_owned();
        answer.lines().next().map(str::to_string)
    };
    tokio::time::timeout(bound, ask).await.ok().flatten()
}

#[tokio::test]
async fn out_of_descriptors_the_accept_loop_backs_off_and_serves_again() {
    let port = common::free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut server = tokio::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 64 && exec \"$0\" serve --addr \"$1\" --llm echo")
        .arg(common::toolnexus_bin())
        .arg(&addr)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn serve");
    let pid = server.id().expect("pid");

    let mut up = None;
    for _ in 0..200 {
        up = health(&addr, Duration::from_secs(5)).await;
        if up.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        up.as_deref(),
        Some("HTTP/1.1 200 OK"),
        "serve did not start"
    );

    // 64 descriptors take about 50 connections; the rest wait in the
    // backlog (std's 128, so no connect waits for a retried SYN). Each
    // sends a request head and holds back its body: a connection being
    // served is never closed to make room, so descriptors stay short.
    let mut held = Vec::new();
    for _ in 0..100 {
        let mut c = TcpStream::connect(&addr).await.expect("connect");
        c.write_all(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n")
            .await
            .expect("head");
        held.push(c);
    }
    // Let the server take what it can and meet EMFILE.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = cpu_ticks(pid);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let spent = cpu_ticks(pid) - before;
    // 3 s of a spinning accept loop is ~300 ticks (at 100 Hz); backing off
    // (at most one retry a second once the wait has grown) is near 0.
    assert!(
        spent < 60,
        "the server spent {spent} ticks of CPU in 3 s while out of descriptors"
    );

    // Figures for the record, not assertions.
    eprintln!("CPU while out of descriptors: {spent} ticks in 3 s");
    drop(held);
    let freed = std::time::Instant::now();
    let answer = health(&addr, Duration::from_secs(20)).await;
    eprintln!(
        "answered {:?} after the descriptors were freed",
        freed.elapsed()
    );
    assert_eq!(
        answer.as_deref(),
        Some("HTTP/1.1 200 OK"),
        "no answer once the descriptors were freed"
    );

    server.start_kill().expect("kill");
    let out = tokio::time::timeout(Duration::from_secs(20), server.wait_with_output())
        .await
        .expect("the server exits")
        .expect("output");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("accepting a connection failed"),
        "the server never ran out of descriptors: {log}"
    );
}
