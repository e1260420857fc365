//! The agent descriptor: where a remote agent's card is and how to call it.

use std::time::Duration;

/// Default overall time limit of one call, in ms.
pub const DEFAULT_TIMEOUT_MS: u64 = 300_000;
/// Default upper bound of the interval between two GetTask polls, in ms.
pub const DEFAULT_POLL_EVERY_MS: u64 = 1_000;

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
    /// Advertise the optional `taskId` and `contextId` arguments in the
    /// tools' input schema, so a model can answer a task waiting for input
    /// and continue a conversation. Off: the fixed `{task}` schema of the
    /// toolnexus contract (the arguments are accepted either way).
    pub conversational: bool,
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

    /// The headers with `${NAME}` expanded through `lookup`.
    pub fn expanded_headers(
        &self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Vec<(String, String)> {
        self.headers
            .iter()
            .map(|(k, v)| (k.clone(), expand_env(v, &lookup)))
            .collect()
    }
}

/// Whole milliseconds, saturating (a `Duration` may exceed `u64` ms).
/// Without `as_millis`: its `u128` arithmetic costs the wasm build.
pub fn millis(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1000)
        .saturating_add(u64::from(d.subsec_millis()))
}

/// Expands every `${NAME}` (`NAME` of `[A-Za-z0-9_]+`) through `lookup`; an
/// unset variable becomes the empty string. Anything else is kept verbatim.
pub fn expand_env(value: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if name_len > 0 && after[name_len..].starts_with('}') {
            out.push_str(&lookup(&after[..name_len]).unwrap_or_default());
            rest = &after[name_len + 1..];
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
    fn defaults_apply_at_resolve_time_only() {
        let a = Agent::new("http://x/card");
        assert_eq!((a.timeout, a.poll_every), (None, None));
        assert_eq!((a.timeout_ms(), a.poll_every_ms()), (300_000, 1_000));
    }
}
