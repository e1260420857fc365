//! `toolnexus call` keeps Agent Cards as their server's HTTP caching headers
//! allow: a fresh card is not fetched again, a stale one is revalidated with
//! its ETag, and `--no-cache` or `-H` headers always fetch it.

mod common;

use common::{json_response, run_to_end_in, Stub, CARD_PATH};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use toolnexus_core::{HttpRequest, HttpResponse};

/// The card requests a peer saw.
type CardLog = Arc<Mutex<Vec<HttpRequest>>>;

/// An agent whose card comes with `card_headers`, answering `If-None-Match`
/// with 304 when it names `etag`, and completing every task at once.
async fn peer(card_headers: &[(&str, &str)], etag: Option<&'static str>) -> (Stub, CardLog) {
    let log: CardLog = Arc::default();
    let seen = log.clone();
    let card_headers: Vec<(String, String)> = card_headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let stub = Stub::start(move |req| {
        if req.url == CARD_PATH {
            seen.lock().expect("log").push(req.clone());
            let mut headers = card_headers.clone();
            if etag.is_some() && req.header("if-none-match") == etag {
                return HttpResponse {
                    status: 304,
                    headers,
                    body: vec![],
                };
            }
            let card = json!({"name": "cached", "skills": [{"id": "echo", "description": "Echo"}]});
            let mut resp = json_response(200, &card);
            resp.headers.append(&mut headers);
            return resp;
        }
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let text = body["params"]["message"]["parts"][0]["text"].clone();
        let task = json!({"id": "t1", "status": {"state": "completed"},
            "artifacts": [{"parts": [{"kind": "text", "text": text}]}]});
        json_response(
            200,
            &json!({"jsonrpc": "2.0", "id": body["id"], "result": task}),
        )
    })
    .await;
    (stub, log)
}

/// A fresh, empty cache folder for one test.
fn cache_dir(test: &str) -> PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("card-cache-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Runs `toolnexus call CARD echo TEXT [extra…]` and checks it succeeded.
async fn call(cache: &Path, card: &str, text: &str, extra: &[&str]) {
    let mut args = vec!["call", card, "echo", text];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = run_to_end_in(cache, &args).await;
    assert_eq!(code, 0, "{stdout} {stderr}");
    let r: Value = serde_json::from_str(&stdout).expect("JSON on stdout");
    assert_eq!(r["output"], text);
}

/// The one stored entry's inode (a rewrite, temp file + rename, makes a new one).
fn stored_file(cache: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut files = std::fs::read_dir(cache.join("cards")).expect("cards folder");
    let entry = files.next().expect("a stored card").expect("entry");
    assert!(files.next().is_none(), "one stored card");
    entry.metadata().expect("metadata").ino()
}

fn card_gets(log: &CardLog) -> Vec<HttpRequest> {
    log.lock().expect("log").clone()
}

#[tokio::test]
async fn a_card_fresh_by_max_age_is_fetched_once() {
    let cache = cache_dir("max-age");
    let (peer, log) = peer(&[("Cache-Control", "public, max-age=3600")], None).await;
    let card = peer.card_url();
    call(&cache, &card, "one", &[]).await;
    call(&cache, &card, "two", &[]).await;
    assert_eq!(
        card_gets(&log).len(),
        1,
        "the second call used the cached card"
    );

    call(&cache, &card, "three", &["--no-cache"]).await;
    assert_eq!(card_gets(&log).len(), 2, "--no-cache fetches the card");
    // Headers may be credentials: such requests never use the cache.
    call(&cache, &card, "four", &["-H", "Authorization: Bearer x"]).await;
    assert_eq!(card_gets(&log).len(), 3, "-H fetches the card");
    peer.handle.stop().await;
}

#[tokio::test]
async fn a_stale_card_is_revalidated_with_its_etag() {
    let cache = cache_dir("etag");
    let headers = [("Cache-Control", "no-cache"), ("ETag", "\"v1\"")];
    let (peer, log) = peer(&headers, Some("\"v1\"")).await;
    let card = peer.card_url();
    call(&cache, &card, "one", &[]).await;
    let stored = stored_file(&cache);
    call(&cache, &card, "two", &[]).await;
    let gets = card_gets(&log);
    assert_eq!(gets.len(), 2, "no-cache: every call asks the server");
    assert_eq!(
        stored_file(&cache),
        stored,
        "a 304 that changes nothing leaves the stored entry as it was (no rewrite)"
    );
    assert_eq!(gets[0].header("if-none-match"), None);
    assert_eq!(
        gets[1].header("if-none-match"),
        Some("\"v1\""),
        "answered 304, and the call went on with the stored card"
    );
    peer.handle.stop().await;
}

#[tokio::test]
async fn a_card_without_caching_headers_is_not_stored() {
    let cache = cache_dir("none");
    let (peer, log) = peer(&[], None).await;
    let card = peer.card_url();
    call(&cache, &card, "one", &[]).await;
    call(&cache, &card, "two", &[]).await;
    let gets = card_gets(&log);
    assert_eq!(gets.len(), 2);
    assert!(gets.iter().all(|g| g.header("if-none-match").is_none()));
    let stored = std::fs::read_dir(cache.join("cards"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(stored, 0, "nothing stored");
    peer.handle.stop().await;
}

#[tokio::test]
async fn a_fresh_cached_card_over_the_calls_limits_is_fetched_again() {
    let cache = cache_dir("limits");
    let (peer, log) = peer(&[("Cache-Control", "public, max-age=3600")], None).await;
    let card = peer.card_url();
    call(&cache, &card, "one", &[]).await;
    // The stored card lists one skill: a call that allows none may not use
    // it, so it asks the server, whose card is refused for the same reason.
    let args = ["call", card.as_str(), "echo", "two", "--max-skills", "0"];
    let (code, stdout, stderr) = run_to_end_in(&cache, &args).await;
    assert_eq!(code, 1, "{stdout} {stderr}");
    assert!(stderr.contains("skills"), "{stderr}");
    assert_eq!(card_gets(&log).len(), 2, "the stored card was not used");
    call(&cache, &card, "three", &[]).await;
    assert_eq!(
        card_gets(&log).len(),
        2,
        "within the limits, the stored card serves again"
    );
    peer.handle.stop().await;
}
