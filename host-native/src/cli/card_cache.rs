//! The CLI's Agent Card cache: a private HTTP cache on disk (RFC 9111), so
//! `toolnexus call` and `tools` skip the card request while the server says
//! the card is fresh, and revalidate it cheaply once it is stale.
//!
//! - A 2xx card is stored when its `Cache-Control` allows (no `no-store`, no
//!   `Vary: *`) and it grants freshness (`max-age`, less `Age`) or carries a
//!   validator (`ETag`, `Last-Modified`). Without either it is not stored:
//!   nothing could be saved by it. `no-cache` stores it as always stale.
//! - Fresh ⇒ used with no request. Stale ⇒ a conditional GET
//!   (`If-None-Match`, `If-Modified-Since`); 304 ⇒ the stored card, with its
//!   freshness renewed from the 304's headers; anything else replaces it.
//! - No heuristic freshness, no `Expires` (stale, so revalidated), no stale
//!   answer when the server cannot be reached.
//! - Requests with `-H` headers bypass it: those may be credentials, and the
//!   cache key would have to include them.
//!
//! One file per card URL under the user cache dir (`$TOOLNEXUS_CACHE_DIR`,
//! else `$XDG_CACHE_HOME/toolnexus`, `~/.cache/toolnexus`,
//! `~/Library/Caches/toolnexus`, `%LOCALAPPDATA%\toolnexus`), written
//! atomically. Any trouble with the folder just means no caching.

use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use toolnexus_core::{
    Agent, AgentCard, Error, HttpRequest, HttpResponse, Transport, TransportError,
};
use toolnexus_host_native::NativeTransport;

/// The folder of cached cards.
pub struct CardCache {
    dir: PathBuf,
}

/// One stored card response.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    url: String,
    /// Unix seconds when the response, or its last revalidation, arrived.
    stored_at: u64,
    /// Seconds it stays fresh after `stored_at`; 0 revalidates every time.
    fresh_for: u64,
    etag: Option<String>,
    last_modified: Option<String>,
    /// The card as the server sent it.
    body: String,
}

impl Entry {
    fn is_fresh(&self, now: u64) -> bool {
        // A clock that went back makes nothing fresh.
        now >= self.stored_at && now - self.stored_at < self.fresh_for
    }
}

impl CardCache {
    /// The cache in the user cache dir; `None` when there is none.
    pub fn open() -> Option<CardCache> {
        Some(CardCache {
            dir: user_cache_dir()?.join("cards"),
        })
    }

    fn file(&self, url: &str) -> PathBuf {
        // FNV-1a: stable across builds and platforms, unlike std's hasher.
        let hash = url.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        self.dir.join(format!("{hash:016x}.json"))
    }

    fn load(&self, url: &str) -> Option<Entry> {
        let bytes = std::fs::read(self.file(url)).ok()?;
        let entry: Entry = serde_json::from_slice(&bytes).ok()?;
        // Two URLs may share a hash; the file says whose it is.
        (entry.url == url).then_some(entry)
    }

    fn save(&self, entry: &Entry) {
        let Ok(bytes) = serde_json::to_vec(entry) else {
            return;
        };
        let path = self.file(&entry.url);
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        let written = std::fs::create_dir_all(&self.dir)
            .and_then(|_| std::fs::write(&tmp, bytes))
            .and_then(|_| std::fs::rename(&tmp, &path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }

    fn remove(&self, url: &str) {
        let _ = std::fs::remove_file(self.file(url));
    }
}

/// `$TOOLNEXUS_CACHE_DIR`, else the platform's user cache dir + `toolnexus`.
fn user_cache_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("TOOLNEXUS_CACHE_DIR") {
        return Some(dir.into());
    }
    let base: PathBuf = if cfg!(windows) {
        var("LOCALAPPDATA")?.into()
    } else if cfg!(target_os = "macos") {
        PathBuf::from(var("HOME")?).join("Library/Caches")
    } else {
        match var("XDG_CACHE_HOME").map(PathBuf::from) {
            Some(dir) if dir.is_absolute() => dir,
            _ => PathBuf::from(var("HOME")?).join(".cache"),
        }
    };
    Some(base.join("toolnexus"))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// What a response allows a private cache: `None` ⇒ do not store; else the
/// seconds it is fresh for.
fn freshness(resp: &HttpResponse) -> Option<u64> {
    let mut max_age = None;
    let mut no_cache = false;
    for (name, value) in &resp.headers {
        if !name.eq_ignore_ascii_case("cache-control") {
            continue;
        }
        for directive in value.split(',') {
            let (key, arg) = match directive.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim().trim_matches('"'))),
                None => (directive.trim(), None),
            };
            match key.to_ascii_lowercase().as_str() {
                "no-store" => return None,
                "no-cache" => no_cache = true,
                // An unparsable max-age makes the response stale (RFC 9111 §4.2.1).
                "max-age" => max_age = Some(arg.and_then(|a| a.parse::<u64>().ok()).unwrap_or(0)),
                _ => {}
            }
        }
    }
    if resp.header("vary").is_some_and(|v| v.trim() == "*") {
        return None;
    }
    let age = resp
        .header("age")
        .and_then(|a| a.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let fresh_for = match (no_cache, max_age) {
        (false, Some(max_age)) => max_age.saturating_sub(age),
        _ => 0,
    };
    let validated = resp.header("etag").is_some() || resp.header("last-modified").is_some();
    (fresh_for > 0 || validated).then_some(fresh_for)
}

impl CardCache {
    /// The stored card of `url` while it is fresh, not yet read.
    fn fresh_body(&self, url: &str) -> Option<String> {
        Some(self.load(url).filter(|e| e.is_fresh(unix_now()))?.body)
    }

    /// The stored card of `url` while it is fresh and reads within `limits`.
    #[cfg(feature = "component")]
    fn fresh(&self, url: &str, limits: (u64, u64)) -> Option<Vec<u8>> {
        let body = self.fresh_body(url)?;
        AgentCard::parse_limited(body.as_bytes(), limits.0, limits.1).ok()?;
        Some(body.into_bytes())
    }

    /// The conditional headers that revalidate the stored card of `url`.
    fn validators(&self, url: &str) -> Vec<(String, String)> {
        let Some(entry) = self.load(url) else {
            return Vec::new();
        };
        let mut headers = Vec::new();
        if let Some(etag) = entry.etag {
            headers.push(("If-None-Match".to_string(), etag));
        }
        if let Some(date) = entry.last_modified {
            headers.push(("If-Modified-Since".to_string(), date));
        }
        headers
    }

    /// Takes the server's answer to a card GET: a 304 renews the stored
    /// card and returns it; a 2xx is stored as its headers allow (or the old
    /// entry dropped); anything else leaves the cache alone.
    fn update(&self, url: &str, resp: &HttpResponse) -> Option<Vec<u8>> {
        if resp.status == 304 {
            let mut entry = self.load(url)?;
            if resp.headers.iter().any(|(k, v)| {
                k.eq_ignore_ascii_case("cache-control")
                    && v.to_ascii_lowercase().contains("no-store")
            }) {
                self.remove(url);
                return Some(entry.body.into_bytes());
            }
            let before = (entry.fresh_for, entry.etag.clone());
            if let Some(fresh_for) = freshness(resp) {
                entry.fresh_for = fresh_for;
            }
            if let Some(etag) = resp.header("etag") {
                entry.etag = Some(etag.to_string());
            }
            // Renewed freshness starts now; an entry that is never fresh and
            // kept its validator is left as it is (no write on every call).
            if entry.fresh_for > 0 || (entry.fresh_for, entry.etag.clone()) != before {
                entry.stored_at = unix_now();
                self.save(&entry);
            }
            return Some(entry.body.into_bytes());
        }
        if resp.is_success() {
            match (freshness(resp), String::from_utf8(resp.body.clone())) {
                (Some(fresh_for), Ok(body)) => self.save(&Entry {
                    url: url.to_string(),
                    stored_at: unix_now(),
                    fresh_for,
                    etag: resp.header("etag").map(str::to_string),
                    last_modified: resp.header("last-modified").map(str::to_string),
                    body,
                }),
                _ => self.remove(url),
            }
        }
        None
    }
}

/// The card cache as the component's host uses it (`--engine wasm`): the
/// component still sends the card GET; the host answers it from here.
#[cfg(feature = "component")]
pub struct AgentCards {
    pub cache: CardCache,
    /// The agent's card limits (bytes, skills): a stored card over them is not fresh.
    pub limits: (u64, u64),
}

#[cfg(feature = "component")]
impl toolnexus_host_native::component_host::CardStore for AgentCards {
    fn fresh(&self, url: &str) -> Option<Vec<u8>> {
        self.cache.fresh(url, self.limits)
    }

    fn validators(&self, url: &str) -> Vec<(String, String)> {
        self.cache.validators(url)
    }

    fn update(&self, url: &str, response: &HttpResponse) -> Option<Vec<u8>> {
        self.cache.update(url, response)
    }
}

/// The agent's card: from `cache` while fresh, revalidated when stale,
/// fetched otherwise; exactly [`toolnexus_core::fetch_card`] when
/// `cache` is `None` or the agent has headers.
pub async fn fetch_card(
    transport: &NativeTransport,
    agent: &Agent,
    cache: Option<&CardCache>,
) -> Result<AgentCard, Error> {
    let Some(cache) = cache.filter(|_| agent.headers.is_empty()) else {
        return toolnexus_core::fetch_card(transport, agent).await;
    };
    let (max_bytes, max_skills) = agent.card_limits();
    let parse = |body: &[u8]| AgentCard::parse_limited(body, max_bytes, max_skills);
    let shown = toolnexus_core::redact_url(&agent.card);
    // Read once: a stored card over the limits fails here and is fetched.
    if let Some(body) = cache.fresh_body(&agent.card) {
        if let Ok(card) = parse(body.as_bytes()) {
            return Ok(card);
        }
    }
    let mut req = HttpRequest::get(&agent.card).with_header("Accept", "application/json");
    for (name, value) in cache.validators(&agent.card) {
        req = req.with_header(&name, &value);
    }
    let resp = send(transport, agent, req).await?;
    let malformed = |e: Error| match e {
        // The reason keeps its cause (the JSON error) with the URL added.
        Error::Malformed(r) => Error::Malformed(r.map(|m| format!("{m} ({shown})"), |_| true)),
        e => Error::malformed(format!("{e} ({shown})")),
    };
    if resp.status == 304 {
        if let Some(stored) = cache.update(&agent.card, &resp) {
            return parse(&stored).map_err(malformed);
        }
    }
    if !resp.is_success() {
        return Err(Error::Status {
            status: resp.status,
            url: shown,
            body: resp.body_snippet(200),
        });
    }
    let card = parse(&resp.body).map_err(malformed)?;
    cache.update(&agent.card, &resp);
    Ok(card)
}

/// Sends the card request within the agent's time limit, with the same
/// error texts as the uncached fetch.
/// Sends the card request; its body is read no further than the agent's
/// card size limit (past it the fetch fails and the rest is never read).
async fn send(
    transport: &NativeTransport,
    agent: &Agent,
    req: HttpRequest,
) -> Result<HttpResponse, Error> {
    let limit = Duration::from_millis(agent.timeout_ms());
    let (max_bytes, _) = agent.card_limits();
    let shown = toolnexus_core::redact_url(&agent.card);
    let failed = |e: TransportError| {
        Error::Transport(TransportError::with_source(
            format!("fetching the Agent Card {shown} failed: {e}"),
            e,
        ))
    };
    let fetch = async {
        let mut resp = transport.send_streaming(req).await.map_err(failed)?;
        let mut body = Vec::new();
        while let Some(chunk) = resp.body.next().await {
            let chunk = chunk.map_err(failed)?;
            if (body.len() + chunk.len()) as u64 > max_bytes {
                if (200..300).contains(&resp.status) {
                    return Err(Error::malformed(format!(
                        "the Agent Card is over the limit of {max_bytes} bytes (--max-card-bytes, maxCardBytes) ({shown})"
                    )));
                }
                // A refusal's start is enough to tell it.
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(HttpResponse {
            status: resp.status,
            headers: resp.headers,
            body,
        })
    };
    match tokio::time::timeout(limit, fetch).await {
        Err(_) => Err(Error::transport(format!(
            "fetching the Agent Card {shown} timed out after {}ms",
            agent.timeout_ms()
        ))),
        Ok(answer) => answer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(headers: &[(&str, &str)]) -> HttpResponse {
        HttpResponse {
            status: 200,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: vec![],
        }
    }

    #[test]
    fn freshness_follows_cache_control() {
        // The official JS SDK server's card headers.
        let js = [
            ("ETag", "W/\"709d\""),
            ("Cache-Control", "public, max-age=3600"),
        ];
        assert_eq!(freshness(&with(&js)), Some(3600));
        assert_eq!(
            freshness(&with(&[("cache-control", "max-age=60"), ("Age", "50")])),
            Some(10)
        );
        assert_eq!(
            freshness(&with(&[("Cache-Control", "max-age=60"), ("Age", "90")])),
            None
        );
        assert_eq!(
            freshness(&with(&[
                ("Cache-Control", "no-cache, max-age=60"),
                ("ETag", "\"a\"")
            ])),
            Some(0)
        );
        assert_eq!(freshness(&with(&[("ETag", "\"a\"")])), Some(0));
        assert_eq!(
            freshness(&with(&[("Last-Modified", "Tue, 01 Dec 2026 10:00:00 GMT")])),
            Some(0)
        );
        assert_eq!(
            freshness(&with(&[("Cache-Control", "no-store, max-age=60")])),
            None
        );
        assert_eq!(
            freshness(&with(&[("Cache-Control", "max-age=60"), ("Vary", "*")])),
            None
        );
        assert_eq!(freshness(&with(&[("Cache-Control", "max-age=soon")])), None);
        // No caching headers at all (the Python SDK server): nothing to store.
        assert_eq!(
            freshness(&with(&[("Content-Type", "application/json")])),
            None
        );
    }

    #[test]
    fn an_entry_is_fresh_for_its_lifetime_only() {
        let entry = Entry {
            url: "u".into(),
            stored_at: 1_000,
            fresh_for: 60,
            etag: None,
            last_modified: None,
            body: String::new(),
        };
        assert!(entry.is_fresh(1_000) && entry.is_fresh(1_059));
        assert!(!entry.is_fresh(1_060) && !entry.is_fresh(999));
    }
}
