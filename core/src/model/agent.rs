//! The agent descriptor: where a remote agent's card is and how to call it.

use std::time::Duration;

use crate::model::time::millis;

/// Default overall time limit of one call, in ms.
pub const DEFAULT_TIMEOUT_MS: u64 = 300_000;
/// Default upper bound of the interval between two GetTask polls, in ms.
pub const DEFAULT_POLL_EVERY_MS: u64 = 1_000;
/// Default largest Agent Card read, in bytes (real cards are a few KB).
pub const DEFAULT_MAX_CARD_BYTES: u64 = 1024 * 1024;
/// Default most skills a card may list.
pub const DEFAULT_MAX_SKILLS: u64 = 1_000;

/// A remote A2A agent. Unset fields stay unset; defaults apply when resolved.
///
/// Build it with [`Agent::new`] and the `with_*` methods (new options may
/// be added, so it cannot be built as a struct literal outside this crate):
///
/// ```
/// use std::time::Duration;
/// let agent = toolnexus_core::Agent::new("http://127.0.0.1:8080/.well-known/agent-card.json")
///     .with_header("Authorization", "Bearer ${PEER_TOKEN}")
///     .with_timeout(Duration::from_secs(30));
/// assert_eq!(agent.timeout_ms(), 30_000);
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Agent {
    /// The Agent Card URL.
    pub card: String,
    /// Extra request headers. Values may contain `${NAME}`, expanded from the
    /// environment at every call. Values are secrets: never log them.
    pub headers: Vec<(String, String)>,
    /// Overall time limit of one call (default [`DEFAULT_TIMEOUT_MS`]).
    pub timeout: Option<Duration>,
    /// The longest pause between two GetTask polls (default
    /// [`DEFAULT_POLL_EVERY_MS`]).
    pub poll_every: Option<Duration>,
    /// The largest card read, in bytes (default [`DEFAULT_MAX_CARD_BYTES`]).
    pub max_card_bytes: Option<u64>,
    /// The most skills the card may list (default [`DEFAULT_MAX_SKILLS`]).
    pub max_skills: Option<u64>,
    /// Deprecated: trusts whatever origin the card names as its endpoint
    /// with the credentials (`headers` and `auth`). Prefer listing the
    /// origins in [`Agent::allowed_origins`].
    pub allow_insecure_headers: bool,
    /// The credential for this agent's protected calls (bearer, API key,
    /// OAuth2 client credentials); sent only where
    /// [`crate::credentials_may_go_to`] allows.
    pub auth: Option<crate::Auth>,
    /// Origins (`https://host[:port]`) besides the card's own that may
    /// receive the credentials (`auth` and `headers`), when the card names
    /// an endpoint there.
    pub allowed_origins: Vec<String>,
    /// Advertise the optional `taskId` and `contextId` arguments in the
    /// tools' input schema, so a model can answer a task waiting for input
    /// and continue a conversation. Off: the fixed `{task}` schema of the
    /// toolnexus contract (the arguments are accepted either way).
    pub conversational: bool,
    /// The binding to prefer when the card lists both: `None` is JSON-RPC
    /// first, then HTTP+JSON (a card with only HTTP+JSON is called over it).
    pub binding: Option<crate::wire::rest::Binding>,
}

impl Agent {
    /// An agent with only its card URL.
    pub fn new(card: impl Into<String>) -> Self {
        Agent {
            card: card.into(),
            ..Default::default()
        }
    }

    /// Adds a request header; `${NAME}` in the value is expanded from the
    /// environment at every call.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the overall time limit of one call.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the longest pause between two GetTask polls.
    pub fn with_poll_every(mut self, poll_every: Duration) -> Self {
        self.poll_every = Some(poll_every);
        self
    }

    /// Sets the largest card read, in bytes.
    pub fn with_max_card_bytes(mut self, max_bytes: u64) -> Self {
        self.max_card_bytes = Some(max_bytes);
        self
    }

    /// Sets the most skills the card may list.
    pub fn with_max_skills(mut self, max_skills: u64) -> Self {
        self.max_skills = Some(max_skills);
        self
    }

    /// Deprecated: trusts any endpoint origin the card names with the
    /// credentials (see [`Agent::allow_insecure_headers`]).
    pub fn with_insecure_headers_allowed(mut self, allowed: bool) -> Self {
        self.allow_insecure_headers = allowed;
        self
    }

    /// Sets the credential (`${NAME}` in its values expands at every call).
    pub fn with_auth(mut self, auth: crate::Auth) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Lets the credentials go to `origin` too, when the card names an
    /// endpoint there.
    pub fn with_allowed_origin(mut self, origin: impl Into<String>) -> Self {
        self.allowed_origins.push(origin.into());
        self
    }

    /// Advertises the optional `taskId` / `contextId` tool arguments
    /// (see [`Agent::conversational`]).
    pub fn with_conversational(mut self, conversational: bool) -> Self {
        self.conversational = conversational;
        self
    }

    /// The timeout in force, in ms.
    pub fn timeout_ms(&self) -> u64 {
        self.timeout.map_or(DEFAULT_TIMEOUT_MS, millis)
    }

    /// The poll interval in force, in ms.
    pub fn poll_every_ms(&self) -> u64 {
        self.poll_every.map_or(DEFAULT_POLL_EVERY_MS, millis)
    }

    /// The card size and skill count in force.
    pub fn card_limits(&self) -> (u64, u64) {
        (
            self.max_card_bytes.unwrap_or(DEFAULT_MAX_CARD_BYTES),
            self.max_skills.unwrap_or(DEFAULT_MAX_SKILLS),
        )
    }

    /// Whether this agent's credentials (`auth` and `headers`) may go to
    /// `endpoint`: the card's origin, an allowed origin, or the deprecated
    /// blanket [`Agent::allow_insecure_headers`].
    pub fn credentials_may_go_to(&self, endpoint: &str) -> bool {
        self.allow_insecure_headers
            || crate::credentials_may_go_to(&self.card, endpoint, &self.allowed_origins)
    }

    /// Whether the agent has any caller credential (`auth` or a header).
    pub fn has_credentials(&self) -> bool {
        self.auth.is_some() || !self.headers.is_empty()
    }

    /// The headers with `${NAME}` expanded through `lookup`.
    pub fn expanded_headers(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Vec<(String, String)> {
        self.expanded_headers_with(&lookup)
    }

    /// [`Agent::expanded_headers`], compiled once for every caller's
    /// `lookup` (the npm `.wasm`: one copy, not one per closure).
    fn expanded_headers_with(
        &self,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Vec<(String, String)> {
        self.headers
            .iter()
            .map(|(k, v)| (k.clone(), expand_with(v, lookup)))
            .collect()
    }
}

/// Expands every `${NAME}` (`NAME` of `[A-Za-z0-9_]+`) through `lookup`; an
/// unset variable becomes the empty string. Anything else is kept verbatim.
pub fn expand_env(value: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    expand_with(value, &lookup)
}

/// [`expand_env`], compiled once whatever the `lookup` (see
/// [`Agent::expanded_headers`]).
pub(crate) fn expand_with(value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    // `find_str` and `get`, not `find("${")` and `[..]`: see `find_str`.
    while let Some(start) = crate::wire::http::find_str(rest, "${") {
        out.push_str(rest.get(..start).unwrap_or_default());
        let after = rest.get(start + 2..).unwrap_or_default();
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let (name, brace) = after.split_at_checked(name_len).unwrap_or_default();
        if name_len > 0 && brace.starts_with('}') {
            out.push_str(&lookup(name).unwrap_or_default());
            rest = brace.get(1..).unwrap_or_default();
        } else {
            out.push_str("${");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret".into()),
            "A_1" => Some("x".into()),
            _ => None,
        }
    }

    #[test]
    fn expands_set_and_unset_variables() {
        assert_eq!(expand_env("Bearer ${TOKEN}", env), "Bearer s3cret");
        assert_eq!(expand_env("${A_1}${A_1}-${NOPE}.", env), "xx-.");
        assert_eq!(expand_env("plain", env), "plain");
    }

    #[test]
    fn keeps_text_that_is_not_a_reference() {
        assert_eq!(expand_env("${", env), "${");
        assert_eq!(expand_env("${}", env), "${}");
        assert_eq!(expand_env("${TOKEN", env), "${TOKEN");
        assert_eq!(expand_env("$TOKEN ${bad-name}", env), "$TOKEN ${bad-name}");
    }

    #[test]
    fn credentials_go_to_the_card_origin_and_the_listed_ones_only() {
        let card = "http://cards.example/.well-known/agent-card.json";
        let mut agent = Agent::new(card);
        for ok in ["http://cards.example/rpc", "HTTP://CARDS.EXAMPLE/rpc"] {
            assert!(agent.credentials_may_go_to(ok), "{ok}");
        }
        for refused in [
            "https://cards.example/rpc",
            "https://elsewhere.example/rpc",
            "http://elsewhere.example/rpc",
            "http://cards.example:8080/rpc",
            "http://127.0.0.1:9/",
            "http://localhost:8080/a2a",
            "http://user@evil.example/",
            "/relative",
        ] {
            assert!(!agent.credentials_may_go_to(refused), "{refused}");
        }
        agent = agent.with_allowed_origin("https://API.example/");
        assert!(agent.credentials_may_go_to("https://api.example/a2a"));
        assert!(!agent.credentials_may_go_to("https://api.example:444/a2a"));
        agent.allow_insecure_headers = true;
        assert!(
            agent.credentials_may_go_to("http://evil.example/"),
            "opted in"
        );
    }

    #[test]
    fn defaults_apply_at_resolve_time_only() {
        let a = Agent::new("http://x/card");
        assert_eq!((a.timeout, a.poll_every), (None, None));
        assert_eq!((a.timeout_ms(), a.poll_every_ms()), (300_000, 1_000));
    }
}
