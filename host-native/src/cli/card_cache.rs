//! The CLI's Agent Card cache: a private HTTP cache on disk (RFC 9111), so
//! `toolnexus call` and `tools` skip the card request while the server says
//! the card is fresh, and revalidate it cheaply once it is stale.
//!
//! The rules are `http-cache-semantics`' (a single-user cache: `private` is
//! cacheable, `s-maxage` ignored), with no heuristic freshness:
//! - A 2xx card is stored when its policy is storable (no `no-store`, ...)
//!   and it grants freshness (`max-age` less `Age`, `Expires`) or carries a
//!   validator (`ETag`, `Last-Modified`). Without either it is not stored:
//!   nothing could be saved by it. `no-cache` stores it as always stale.
//! - Fresh ⇒ used with no request. Stale ⇒ a conditional GET
//!   (`If-None-Match`, `If-Modified-Since`); a 304 that matches the stored
//!   card ⇒ the stored card, its policy renewed from the 304's headers;
//!   anything else replaces it.
//! - No stale answer when the server cannot be reached.
//! - Requests with `-H` headers bypass it: those may be credentials, and the
//!   cache key would have to include them.
//!
//! One file per card URL under the user cache dir (`$TOOLNEXUS_CACHE_DIR`,
//! else the platform's, from `dirs`: `$XDG_CACHE_HOME/toolnexus`,
//! `~/.cache/toolnexus`, `~/Library/Caches/toolnexus`,
//! `%LOCALAPPDATA%\toolnexus`), written atomically. Any trouble with the
//! folder just means no caching.

use futures_util::StreamExt;
use http_cache_semantics::{AfterResponse, BeforeRequest, CacheOptions, CachePolicy};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, SystemTime};
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
struct Entry {
    url: String,
    /// The request and response headers the rules read, and when it arrived.
    policy: CachePolicy,
    /// The card as the server sent it.
    body: String,
}

/// A private cache that trusts only what the server said.
fn options() -> CacheOptions {
    CacheOptions {
        shared: false,
        cache_heuristic: 0.0,
        ..CacheOptions::default()
    }
}

/// The card GET of `url` as the rules see it; `None` for a URL `http`
/// cannot hold (then nothing is cached).
fn card_get(url: &str) -> Option<http::Request<()>> {
    http::Request::get(url)
        .header("accept", "application/json")
        .body(())
        .ok()
}

/// The headers of `resp` as the rules see them (a header `http` refuses is
/// left out).
fn as_http(resp: &HttpResponse) -> Option<http::Response<()>> {
    let mut out = http::Response::builder().status(resp.status);
    for (name, value) in &resp.headers {
        if let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(name.as_bytes()),
            http::HeaderValue::from_str(value),
        ) {
            out = out.header(name, value);
        }
    }
    out.body(()).ok()
}

/// Whether the response can save a request: fresh for a while, or with a
/// validator to revalidate it cheaply.
fn worth_storing(policy: &CachePolicy, resp: &HttpResponse, now: SystemTime) -> bool {
    policy.is_storable()
        && (policy.time_to_live(now) > Duration::ZERO
            || resp.header("etag").is_some()
            || resp.header("last-modified").is_some())
}

impl CardCache {
    /// The cache in the user cache dir; `None` when there is none.
    pub fn open() -> Option<CardCache> {
        Some(CardCache {
            dir: user_cache_dir()?.join("cards"),
        })
    }

    fn file(&self, url: &str) -> PathBuf {
        // Stable across builds and platforms, unlike std's hasher.
        let hash = toolnexus_core::stable_hash(url.as_bytes());
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
    match std::env::var_os("TOOLNEXUS_CACHE_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => Some(dir.into()),
        None => Some(dirs::cache_dir()?.join("toolnexus")),
    }
}

/// The `If-None-Match` / `If-Modified-Since` headers that revalidate a
/// stored response under `policy` (none while it is fresh).
fn conditional(
    policy: &CachePolicy,
    req: &http::Request<()>,
    now: SystemTime,
) -> Vec<(String, String)> {
    let BeforeRequest::Stale {
        request,
        matches: true,
    } = policy.before_request(req, now)
    else {
        return Vec::new();
    };
    ["if-none-match", "if-modified-since"]
        .into_iter()
        .filter_map(|name| {
            let value = request.headers.get(name)?.to_str().ok()?;
            Some((name.to_string(), value.to_string()))
        })
        .collect()
}

impl CardCache {
    /// The stored card of `url` while it is fresh, not yet read.
    fn fresh_body(&self, url: &str) -> Option<String> {
        let entry = self.load(url)?;
        match entry
            .policy
            .before_request(&card_get(url)?, SystemTime::now())
        {
            BeforeRequest::Fresh(_) => Some(entry.body),
            BeforeRequest::Stale { .. } => None,
        }
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
        match (self.load(url), card_get(url)) {
            (Some(entry), Some(req)) => conditional(&entry.policy, &req, SystemTime::now()),
            _ => Vec::new(),
        }
    }

    /// Takes the server's answer to a card GET: a 304 that matches the
    /// stored card renews it and returns it; a 2xx is stored as its headers
    /// allow (or the old entry dropped); anything else leaves the cache alone.
    fn update(&self, url: &str, resp: &HttpResponse) -> Option<Vec<u8>> {
        let (req, res) = (card_get(url)?, as_http(resp)?);
        let now = SystemTime::now();
        if resp.status == 304 {
            let entry = self.load(url)?;
            let AfterResponse::NotModified(policy, _) =
                entry.policy.after_response(&req, &res, now)
            else {
                // Not the stored card's validator: the stored card is not it.
                self.remove(url);
                return None;
            };
            if !policy.is_storable() {
                self.remove(url);
            } else if policy.time_to_live(now) > Duration::ZERO
                || conditional(&policy, &req, now) != conditional(&entry.policy, &req, now)
            {
                // Renewed freshness starts now; an entry that is never fresh
                // and kept its validator is left as it is (no write on every
                // call).
                self.save(&Entry {
                    url: url.to_string(),
                    policy,
                    body: entry.body.clone(),
                });
            }
            return Some(entry.body.into_bytes());
        }
        if resp.is_success() {
            let policy = CachePolicy::new_options(&req, &res, now, options());
            match String::from_utf8(resp.body.clone()) {
                Ok(body) if worth_storing(&policy, resp, now) => self.save(&Entry {
                    url: url.to_string(),
                    policy,
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
    let resp = match resp.status {
        304 => match cache.update(&agent.card, &resp) {
            Some(stored) => return parse(&stored).map_err(malformed),
            // A 304 for some other card than the stored one: ask again,
            // unconditionally.
            None => {
                let req = HttpRequest::get(&agent.card).with_header("Accept", "application/json");
                send(transport, agent, req).await?
            }
        },
        _ => resp,
    };
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

    /// Whether a 200 card answer with `headers` is stored, and how long it
    /// is fresh for.
    fn stored_for(headers: &[(&str, &str)]) -> Option<u64> {
        let resp = HttpResponse {
            status: 200,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: vec![],
        };
        let url = "http://127.0.0.1:1/.well-known/agent-card.json";
        let (req, res) = (card_get(url)?, as_http(&resp)?);
        let now = SystemTime::now();
        let policy = CachePolicy::new_options(&req, &res, now, options());
        worth_storing(&policy, &resp, now).then(|| policy.time_to_live(now).as_secs())
    }

    #[test]
    fn what_is_stored_follows_cache_control() {
        // The official JS SDK server's card headers.
        let js = [
            ("ETag", "W/\"709d\""),
            ("Cache-Control", "public, max-age=3600"),
        ];
        assert_eq!(stored_for(&js), Some(3600));
        assert_eq!(
            stored_for(&[("cache-control", "max-age=60"), ("Age", "50")]),
            Some(10)
        );
        assert_eq!(
            stored_for(&[("Cache-Control", "max-age=60"), ("Age", "90")]),
            None
        );
        assert_eq!(
            stored_for(&[("Cache-Control", "no-cache, max-age=60"), ("ETag", "\"a\"")]),
            Some(0)
        );
        assert_eq!(stored_for(&[("ETag", "\"a\"")]), Some(0));
        // No heuristic freshness from Last-Modified: only revalidated.
        assert_eq!(
            stored_for(&[("Last-Modified", "Tue, 01 Dec 2026 10:00:00 GMT")]),
            Some(0)
        );
        assert_eq!(
            stored_for(&[("Cache-Control", "no-store, max-age=60")]),
            None
        );
        assert_eq!(
            stored_for(&[("Cache-Control", "max-age=60"), ("Vary", "*")]),
            None
        );
        assert_eq!(stored_for(&[("Cache-Control", "max-age=soon")]), None);
        // A private card is a single user's: this cache may keep it.
        assert_eq!(
            stored_for(&[("Cache-Control", "private, max-age=60")]),
            Some(60)
        );
        // No caching headers at all (the Python SDK server): nothing to store.
        assert_eq!(stored_for(&[("Content-Type", "application/json")]), None);
    }

    #[test]
    fn a_stored_card_is_fresh_for_its_lifetime_then_revalidated() {
        let dir = std::env::temp_dir().join(format!("toolnexus-cards-{}", std::process::id()));
        let cache = CardCache { dir: dir.clone() };
        let url = "http://127.0.0.1:1/.well-known/agent-card.json";
        let answer = |headers: &[(&str, &str)]| HttpResponse {
            status: 200,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: b"{}".to_vec(),
        };
        cache.update(
            url,
            &answer(&[("Cache-Control", "max-age=600"), ("ETag", "\"v1\"")]),
        );
        assert_eq!(cache.fresh_body(url).as_deref(), Some("{}"));
        assert!(
            cache.validators(url).is_empty(),
            "fresh: nothing to revalidate"
        );

        cache.update(
            url,
            &answer(&[("Cache-Control", "no-cache"), ("ETag", "\"v2\"")]),
        );
        assert_eq!(cache.fresh_body(url), None);
        assert_eq!(
            cache.validators(url),
            [("if-none-match".to_string(), "\"v2\"".to_string())]
        );
        let not_modified = |etag: &str| HttpResponse {
            status: 304,
            headers: vec![("ETag".into(), etag.into())],
            body: vec![],
        };
        assert_eq!(
            cache.update(url, &not_modified("\"v2\"")),
            Some(b"{}".to_vec())
        );
        // A 304 naming another card drops the stored one.
        assert_eq!(cache.update(url, &not_modified("\"v3\"")), None);
        assert!(cache.validators(url).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
