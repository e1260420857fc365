//! The Agent Card, read leniently in all three shapes (toolnexus, A2A 0.3
//! with `url`, A2A 1.0 with `supportedInterfaces`).

use crate::error::{Error, Reason, TransportError};
use crate::wire::rpc::Dialect;
use crate::wire::url;
use serde_json::Value;

/// One advertised skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardSkill {
    pub id: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub tags: Vec<String>,
}

impl CardSkill {
    /// `id`, else `name`: what the tool name is built from.
    pub fn key(&self) -> Option<&str> {
        self.id.as_deref().or(self.name.as_deref())
    }
}

/// One entry of a 1.0 card's `supportedInterfaces` (or 0.3 `additionalInterfaces`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardInterface {
    pub url: String,
    pub protocol_binding: String,
    pub protocol_version: Option<String>,
    /// `tenant` (1.0): sent with every request (HTTP+JSON: a path segment).
    pub tenant: Option<String>,
}

/// The parts of an Agent Card the client uses. Unknown fields are ignored;
/// fields of the wrong type count as absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCard {
    pub name: String,
    pub description: Option<String>,
    pub version: Option<String>,
    pub protocol_version: Option<String>,
    pub url: Option<String>,
    pub preferred_transport: Option<String>,
    pub supported_interfaces: Vec<CardInterface>,
    pub provider_organization: Option<String>,
    pub skills: Vec<CardSkill>,
    /// `capabilities.extensions[].uri`.
    pub extensions: Vec<String>,
    /// `capabilities.streaming`: the agent answers `SendStreamingMessage` with SSE.
    pub streaming: bool,
    /// `securitySchemes` the client can use, by name, in the card's order.
    pub security_schemes: Vec<(String, crate::SecurityScheme)>,
    /// `securityRequirements` (1.0) or `security` (0.3): any one suffices.
    pub security_requirements: Vec<crate::Requirement>,
}

/// The A2A extension a card lists when its GetTask honours `Prefer: wait=N`
/// (RFC 7240) by holding the answer until the task settles.
pub const LONG_POLL_EXTENSION: &str = "urn:toolnexus:a2a:get-task-long-poll:v1";

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// The items of the array at `key` (none if it is not one).
fn items<'a>(v: Option<&'a Value>, key: &str) -> &'a [Value] {
    v.and_then(|v| v.get(key))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

// The lists of a card are read with plain loops, not `filter_map(..)
// .collect()` chains: each chain is its own iterator code in the client `.wasm`.
fn interfaces(v: &Value, key: &str) -> Vec<CardInterface> {
    let mut out = Vec::new();
    for i in items(Some(v), key) {
        // 0.3 says `transport`, 1.0 says `protocolBinding`.
        let binding = text(i, "protocolBinding").or_else(|| text(i, "transport"));
        if let (Some(url), Some(protocol_binding)) = (text(i, "url"), binding) {
            out.push(CardInterface {
                url,
                protocol_binding,
                protocol_version: text(i, "protocolVersion"),
                tenant: text(i, "tenant").filter(|t| !t.is_empty()),
            });
        }
    }
    out
}

impl AgentCard {
    /// Parses a card from JSON bytes. Fails with [`Error::Malformed`] when the
    /// body is not JSON or not a card (an object with a string `name`).
    /// Cards over the default limits are refused, as [`AgentCard::parse_limited`] does.
    pub fn parse(body: &[u8]) -> Result<Self, Error> {
        Self::parse_limited(
            body,
            crate::model::agent::DEFAULT_MAX_CARD_BYTES,
            crate::model::agent::DEFAULT_MAX_SKILLS,
        )
    }

    /// [`AgentCard::parse`] that refuses a card over `max_bytes`, or listing
    /// more than `max_skills` skills, before reading any skill: a hostile
    /// peer's card costs at most that much memory and output.
    pub fn parse_limited(body: &[u8], max_bytes: u64, max_skills: u64) -> Result<Self, Error> {
        if body.len() as u64 > max_bytes {
            return Err(over_limit(max_bytes));
        }
        let v: Value = serde_json::from_slice(body).map_err(|e| {
            Error::Malformed(Reason::with_source(
                format!("the Agent Card is not valid JSON: {e}"),
                e,
            ))
        })?;
        let skills = v
            .get("skills")
            .and_then(Value::as_array)
            .map_or(0, Vec::len) as u64;
        if skills > max_skills {
            return Err(Error::malformed(format!(
                "the Agent Card lists {skills} skills, over the limit of {max_skills} (--max-skills, maxSkills)"
            )));
        }
        Self::from_value(&v)
    }

    /// Reads a card from a JSON value; see [`AgentCard::parse`].
    pub fn from_value(v: &Value) -> Result<Self, Error> {
        if !v.is_object() {
            return Err(Error::malformed("the Agent Card is not a JSON object"));
        }
        let name = text(v, "name")
            .ok_or_else(|| Error::malformed("not an Agent Card: it has no string \"name\""))?;
        let mut skills = Vec::new();
        // A plain loop, not an iterator chain (see ARCHITECTURE.md).
        for s in v
            .get("skills")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
        {
            skills.push(CardSkill {
                id: text(s, "id"),
                name: text(s, "name"),
                description: text(s, "description"),
                tags: crate::wire::json::strings(s.get("tags")),
            });
        }
        // `get` twice, not `pointer`: one less JSON-pointer parser in the .wasm.
        let capabilities = v.get("capabilities");
        let mut supported_interfaces = interfaces(v, "supportedInterfaces");
        supported_interfaces.extend(interfaces(v, "additionalInterfaces"));
        Ok(AgentCard {
            name,
            description: text(v, "description"),
            version: text(v, "version"),
            protocol_version: text(v, "protocolVersion"),
            url: text(v, "url"),
            preferred_transport: text(v, "preferredTransport"),
            supported_interfaces,
            provider_organization: v.get("provider").and_then(|p| text(p, "organization")),
            skills,
            extensions: {
                let mut uris = Vec::new();
                for e in items(capabilities, "extensions") {
                    uris.extend(text(e, "uri"));
                }
                uris
            },
            streaming: capabilities
                .and_then(|c| c.get("streaming"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            security_schemes: crate::client::auth::read_schemes(v),
            security_requirements: crate::client::auth::read_requirements(v),
        })
    }

    /// Whether the card requires a credential for every call (it lists
    /// security requirements, none of them empty).
    pub fn requires_credentials(&self) -> bool {
        crate::client::auth::requires_credentials(&self.security_requirements)
    }

    /// Whether GetTask may be asked to long-poll ([`LONG_POLL_EXTENSION`]).
    pub fn long_poll(&self) -> bool {
        self.extensions.iter().any(|e| e == LONG_POLL_EXTENSION)
    }

    /// The JSON-RPC endpoint (resolved against `card_url`) and the dialect to
    /// speak there.
    ///
    /// A JSON-RPC interface of protocol 1.x wins (1.0). Otherwise a 0.3
    /// JSON-RPC interface, or the top-level `url`: A2A 0.3 when the card has
    /// 0.3 markers (`preferredTransport`, interfaces), else the toolnexus
    /// dialect. With no usable URL at all, the card URL's origin.
    pub fn endpoint(&self, card_url: &str) -> (Dialect, String) {
        self.endpoint_for(card_url, None)
    }

    /// The HTTP+JSON interface, if the card lists one: 1.x before 0.3 (the
    /// base URL carries its tenant).
    fn rest_endpoint(&self, card_url: &str) -> Option<(Dialect, String)> {
        let rest = |i: &&CardInterface| i.protocol_binding.eq_ignore_ascii_case("HTTP+JSON");
        let list = || self.supported_interfaces.iter().filter(rest);
        let v1 = |i: &&CardInterface| {
            i.protocol_version
                .as_deref()
                .is_some_and(|p| p.starts_with('1'))
        };
        let (dialect, i) = match list().find(v1) {
            Some(i) => (Dialect::Rest10, i),
            None => {
                let i = list().next()?;
                // No version: the card's own (0.3 cards say `protocolVersion`).
                let card_10 = self
                    .protocol_version
                    .as_deref()
                    .is_some_and(|p| p.starts_with('1'));
                let named_03 = i.protocol_version.is_some();
                let d = if named_03 || !card_10 {
                    Dialect::Rest03
                } else {
                    Dialect::Rest10
                };
                (d, i)
            }
        };
        let url = url::resolve(card_url, &i.url);
        Some((
            dialect,
            crate::wire::rest::base_url(&url, i.tenant.as_deref()),
        ))
    }

    /// [`AgentCard::endpoint`] with a preferred binding: JSON-RPC first
    /// (`None` or [`Binding::JsonRpc`](crate::wire::rest::Binding)), then
    /// HTTP+JSON; or HTTP+JSON first. A card that lists HTTP+JSON and no
    /// JSON-RPC (and does not prefer it) is called over HTTP+JSON either way.
    pub fn endpoint_for(
        &self,
        card_url: &str,
        prefer: Option<crate::wire::rest::Binding>,
    ) -> (Dialect, String) {
        let lists = |b: &str| {
            self.supported_interfaces
                .iter()
                .any(|i| i.protocol_binding.eq_ignore_ascii_case(b))
        };
        let rest_only = !lists("JSONRPC")
            && self
                .preferred_transport
                .as_deref()
                .is_none_or(|p| p.eq_ignore_ascii_case("HTTP+JSON"));
        if prefer == Some(crate::wire::rest::Binding::Rest) || rest_only {
            if let Some(found) = self.rest_endpoint(card_url) {
                return found;
            }
        }
        let jsonrpc = |i: &&CardInterface| i.protocol_binding.eq_ignore_ascii_case("JSONRPC");
        let v1 = self.supported_interfaces.iter().filter(jsonrpc).find(|i| {
            i.protocol_version
                .as_deref()
                .is_some_and(|p| p.starts_with('1'))
        });
        if let Some(i) = v1 {
            return (Dialect::V10, url::resolve(card_url, &i.url));
        }
        let marked_03 = self.preferred_transport.is_some() || !self.supported_interfaces.is_empty();
        if let Some(u) = self.url.as_deref().filter(|u| !u.is_empty()) {
            let dialect = if marked_03 {
                Dialect::V03
            } else {
                Dialect::Toolnexus
            };
            return (dialect, url::resolve(card_url, u));
        }
        if let Some(i) = self.supported_interfaces.iter().find(jsonrpc) {
            return (Dialect::V03, url::resolve(card_url, &i.url));
        }
        let origin = url::origin(card_url).unwrap_or(card_url);
        (Dialect::Toolnexus, format!("{origin}/"))
    }

    /// What a UI shows of a card fetched from `card_url`: its identity, and
    /// how the client will talk to it (dialect, endpoint, streaming or
    /// polling), as the call itself decides.
    pub fn summary(&self, card_url: &str) -> CardSummary {
        let (dialect, endpoint) = self.endpoint(card_url);
        let follow = match dialect {
            Dialect::Toolnexus => "poll",
            _ if self.streaming => "stream",
            _ => "block",
        };
        // A plain loop, not an iterator chain (see ARCHITECTURE.md).
        let mut security_schemes = Vec::new();
        for (name, scheme) in &self.security_schemes {
            security_schemes.push(SchemeSummary {
                name: name.clone(),
                kind: match scheme {
                    crate::SecurityScheme::ApiKey { .. } => "apiKey",
                    crate::SecurityScheme::Http { .. } => "http",
                    crate::SecurityScheme::OAuth2 { .. } => "oauth2",
                    crate::SecurityScheme::OpenIdConnect { .. } => "openIdConnect",
                },
            });
        }
        let mut skills = Vec::new();
        for s in &self.skills {
            skills.push(SkillSummary {
                id: s.id.clone(),
                name: s.name.clone(),
                description: s.description.clone(),
                tags: s.tags.clone(),
            });
        }
        CardSummary {
            name: self.name.clone(),
            description: self.description.clone(),
            version: self.version.clone(),
            provider: self.provider_organization.clone(),
            dialect: dialect.name(),
            dialect_reason: match dialect {
                Dialect::V10 => "the card lists a JSON-RPC interface of protocol 1.x",
                Dialect::V03 => "the card has A2A 0.3 markers (preferredTransport or interfaces)",
                Dialect::Toolnexus => "the card has a bare url and no A2A 0.3/1.0 markers",
                Dialect::Rest10 => "the card lists an HTTP+JSON interface of protocol 1.x",
                Dialect::Rest03 => "the card lists an HTTP+JSON interface of protocol 0.3",
            },
            requires_credentials: self.requires_credentials(),
            security_schemes,
            endpoint,
            streaming: self.streaming,
            long_poll: self.long_poll(),
            follow,
            skills,
        }
    }
}

/// A card as a UI shows it ([`AgentCard::summary`]); serialises in camelCase.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CardSummary {
    pub name: String,
    pub description: Option<String>,
    pub version: Option<String>,
    /// `provider.organization`.
    pub provider: Option<String>,
    /// `"1.0"`, `"0.3"` or `"toolnexus"`.
    pub dialect: &'static str,
    /// Why the card reads as that dialect, in words.
    pub dialect_reason: &'static str,
    /// The JSON-RPC endpoint the client sends to.
    pub endpoint: String,
    /// The card requires a credential for every call.
    pub requires_credentials: bool,
    /// The security schemes the client can use, by name and kind.
    pub security_schemes: Vec<SchemeSummary>,
    pub streaming: bool,
    pub long_poll: bool,
    /// How a call follows its task: `"stream"` (SSE), `"block"` (a blocking
    /// SendMessage) or `"poll"` (GetTask).
    pub follow: &'static str,
    pub skills: Vec<SkillSummary>,
}

/// One security scheme of a [`CardSummary`]: its name on the card, and its
/// kind (`apiKey`, `http`, `oauth2`, `openIdConnect`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SchemeSummary {
    pub name: String,
    pub kind: &'static str,
}

/// One skill of a [`CardSummary`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SkillSummary {
    pub id: Option<String>,
    pub name: Option<String>,
    pub description: Option<String>,
    pub tags: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn card(v: Value) -> AgentCard {
        AgentCard::from_value(&v).expect("a card")
    }

    const CARD_URL: &str = "http://127.0.0.1:9/.well-known/agent-card.json";

    fn resolve(peer: &crate::testing::ScriptedPeer, timeout_ms: u64) -> Result<AgentCard, Error> {
        let headers = vec![("X-Key".to_string(), "k".to_string())];
        let mut m = CardMachine::new(CARD_URL, headers, timeout_ms);
        crate::testing::block_on(crate::host::driver::drive(
            &mut m,
            peer,
            std::future::pending(),
        ))
    }

    #[test]
    fn the_card_machine_gets_the_card_once_with_the_headers() {
        let peer = crate::testing::ScriptedPeer::new()
            .card(json!({"name": "desk", "url": "http://127.0.0.1:9/", "skills": []}));
        let c = resolve(&peer, 1000).expect("a card");
        assert_eq!(c.name, "desk");
        let requests = peer.requests();
        assert_eq!(requests.len(), 1);
        let (_, req) = &requests[0];
        assert_eq!((req.method.as_str(), req.url.as_str()), ("GET", CARD_URL));
        assert_eq!(req.header("X-Key"), Some("k"));
        assert_eq!(req.header("Accept"), Some("application/json"));
    }

    #[test]
    fn the_card_machine_times_out_at_its_deadline_in_virtual_time() {
        let peer = crate::testing::ScriptedPeer::new()
            .card(json!({"name": "desk", "skills": []}))
            .card_delay(5_000);
        let err = resolve(&peer, 300).expect_err("too slow");
        assert_eq!(
            err.to_string(),
            format!("fetching the Agent Card {CARD_URL} timed out after 300ms")
        );
        assert_eq!(peer.now(), 300, "gave up at the deadline, not later");
    }

    #[test]
    fn the_card_machine_reports_a_missing_or_broken_card() {
        let missing = crate::testing::ScriptedPeer::new();
        match resolve(&missing, 1000) {
            Err(Error::Status {
                status: 404, url, ..
            }) => assert_eq!(url, CARD_URL),
            other => panic!("not a 404: {other:?}"),
        }
        let broken = crate::testing::ScriptedPeer::new().card(json!(["not", "a", "card"]));
        let err = resolve(&broken, 1000).expect_err("not a card");
        assert!(matches!(err, Error::Malformed(_)), "{err:?}");
        assert!(err.to_string().contains(CARD_URL), "{err}");
    }

    #[test]
    fn toolnexus_card_with_url() {
        let c = card(
            json!({"name": "desk", "url": "http://127.0.0.1:9/", "protocolVersion": "0.3.0",
                            "skills": [{"id": "greet", "name": "greet", "description": "hi"}]}),
        );
        assert_eq!(
            c.endpoint(CARD_URL),
            (Dialect::Toolnexus, "http://127.0.0.1:9/".into())
        );
        assert_eq!(c.skills[0].key(), Some("greet"));
    }

    #[test]
    fn a2a_03_card_with_preferred_transport() {
        let c = card(
            json!({"name": "a", "url": "http://127.0.0.1:9/rpc", "preferredTransport": "JSONRPC",
                            "protocolVersion": "0.3.0", "skills": []}),
        );
        assert_eq!(
            c.endpoint(CARD_URL),
            (Dialect::V03, "http://127.0.0.1:9/rpc".into())
        );
    }

    #[test]
    fn a2a_10_card_with_supported_interfaces() {
        let c = card(json!({"name": "a", "skills": [], "supportedInterfaces": [
            {"url": "http://127.0.0.1:9/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "http://127.0.0.1:9/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": "/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]}));
        assert_eq!(
            c.endpoint(CARD_URL),
            (Dialect::V10, "http://127.0.0.1:9/a2a".into())
        );
    }

    #[test]
    fn hybrid_card_prefers_10() {
        let c = card(
            json!({"name": "h", "url": "http://h/", "preferredTransport": "JSONRPC",
            "supportedInterfaces": [{"url": "http://h/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                                    {"url": "http://h/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}]}),
        );
        assert_eq!(c.endpoint(CARD_URL).0, Dialect::V10);
    }

    #[test]
    fn falls_back_to_the_card_origin() {
        let c = card(json!({"name": "reviewer", "skills": [{"id": "review"}]}));
        assert_eq!(
            c.endpoint(CARD_URL),
            (Dialect::Toolnexus, "http://127.0.0.1:9/".into())
        );
    }

    #[test]
    fn tolerates_unknown_and_mistyped_fields() {
        let c = card(
            json!({"name": "n", "description": 5, "skills": [{"name": "s", "tags": ["a", 1]}, 7],
                            "capabilities": {"x": true}, "url": null}),
        );
        assert_eq!(c.description, None);
        assert_eq!(c.skills.len(), 2);
        assert_eq!(c.skills[0].tags, ["a"]);
        assert_eq!(c.skills[1].key(), None);
    }

    #[test]
    fn a_card_that_is_not_json_keeps_the_json_error_as_its_source() {
        let err = AgentCard::parse(b"{\"name\":").expect_err("not JSON");
        assert!(
            err.to_string()
                .starts_with("the Agent Card is not valid JSON: EOF"),
            "{err}"
        );
        // The npm build keeps no causes (see `error.rs`).
        if !cfg!(all(target_arch = "wasm32", target_os = "unknown")) {
            let cause = std::error::Error::source(&err).expect("a cause");
            assert!(cause.downcast_ref::<serde_json::Error>().is_some());
        }
    }

    #[test]
    fn rejects_what_is_not_a_card() {
        assert!(matches!(
            AgentCard::parse(b"<html>"),
            Err(Error::Malformed(_))
        ));
        assert!(matches!(AgentCard::parse(b"[1]"), Err(Error::Malformed(_))));
        assert!(matches!(
            AgentCard::parse(b"{\"skills\":[]}"),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn a_card_over_its_limits_is_refused_before_its_skills_are_read() {
        let big = format!(
            r#"{{"name":"n","skills":[],"description":"{}"}}"#,
            "x".repeat(2_000)
        );
        let err = AgentCard::parse_limited(big.as_bytes(), 1_000, 10).expect_err("too big");
        assert!(err.to_string().contains("over the limit of 1000"), "{err}");
        let skills: Vec<Value> = (0..11).map(|i| json!({"id": format!("s{i}")})).collect();
        let many = json!({"name": "n", "skills": skills}).to_string();
        let err = AgentCard::parse_limited(many.as_bytes(), 10_000, 10).expect_err("too many");
        assert!(
            err.to_string()
                .contains("lists 11 skills, over the limit of 10"),
            "{err}"
        );
        assert_eq!(
            AgentCard::parse_limited(many.as_bytes(), 10_000, 11).map(|c| c.skills.len()),
            Ok(11)
        );
        let skills: Vec<Value> = (0..1_001).map(|_| json!({"id": "s"})).collect();
        let flood = json!({"name": "n", "skills": skills}).to_string();
        assert!(
            AgentCard::parse(flood.as_bytes()).is_err(),
            "the defaults apply"
        );
    }

    #[test]
    fn the_card_machine_applies_the_agents_limits() {
        let peer = crate::testing::ScriptedPeer::new()
            .card(json!({"name": "desk", "skills": [{"id": "a"}, {"id": "b"}, {"id": "c"}]}));
        let mut m = CardMachine::new(CARD_URL, vec![], 1_000).with_limits((1 << 20, 2));
        let err = crate::testing::block_on(crate::host::driver::drive(
            &mut m,
            &peer,
            std::future::pending(),
        ))
        .expect_err("three skills, two allowed");
        assert!(err.to_string().contains("lists 3 skills"), "{err}");
        assert!(err.to_string().contains(CARD_URL), "{err}");
    }

    #[test]
    fn the_summary_says_how_a_call_will_follow_the_task() {
        let url = "http://h:1/.well-known/agent-card.json";
        let streaming = card(json!({"name": "a", "capabilities": {"streaming": true},
            "supportedInterfaces": [{"url": "http://h:1/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "skills": [{"id": "s", "tags": ["t"]}]}));
        let s = serde_json::to_value(streaming.summary(url)).expect("json");
        assert_eq!(s["dialect"], "1.0");
        assert_eq!(s["endpoint"], "http://h:1/rpc");
        assert_eq!(s["follow"], "stream");
        assert_eq!(s["streaming"], true);
        assert_eq!(s["skills"][0]["tags"][0], "t");
        let blocking = card(json!({"name": "b", "url": "/x", "preferredTransport": "JSONRPC"}));
        assert_eq!(blocking.summary(url).follow, "block");
        assert_eq!(blocking.summary(url).dialect, "0.3");
        let polled =
            card(json!({"name": "c", "url": "http://h:1/", "capabilities": {"streaming": true}}));
        assert_eq!(polled.summary(url).follow, "poll");
        assert_eq!(polled.summary(url).dialect, "toolnexus");
    }
}

/// The error for a card body past `max_bytes`.
fn over_limit(max_bytes: u64) -> Error {
    Error::malformed(format!(
        "the Agent Card is over the limit of {max_bytes} bytes (--max-card-bytes, maxCardBytes)"
    ))
}

/// Fetching and reading an Agent Card, as a machine on the one driver
/// ([`crate::host::driver::drive`]): one GET, bounded by a deadline, then the
/// card read leniently. The body is read as it arrives and no further than
/// the size limit: past it the fetch fails and the body is dropped unread. Hosts run it; [`crate::client::toolkit::fetch_card`] is the
/// usual way.
#[derive(Debug)]
pub struct CardMachine {
    /// The card URL (for messages).
    url: String,
    request: Option<crate::wire::http::HttpRequest>,
    timeout_ms: u64,
    /// The largest card and the most skills read ([`AgentCard::parse_limited`]).
    limits: (u64, u64),
    deadline_ms: u64,
    /// The answer's status and its body so far.
    status: u16,
    body: Vec<u8>,
}

impl CardMachine {
    /// A machine that GETs `url` with `headers` (already expanded) and gives
    /// up after `timeout_ms`.
    pub fn new(url: &str, headers: Vec<(String, String)>, timeout_ms: u64) -> Self {
        let mut request =
            crate::wire::http::HttpRequest::get(url).with_header("Accept", "application/json");
        request.headers.extend(headers);
        CardMachine {
            url: crate::wire::url::redact(url),
            request: Some(request),
            timeout_ms,
            limits: (
                crate::model::agent::DEFAULT_MAX_CARD_BYTES,
                crate::model::agent::DEFAULT_MAX_SKILLS,
            ),
            deadline_ms: 0,
            status: 0,
            body: Vec::new(),
        }
    }

    /// The same machine with other limits: `(max_bytes, max_skills)`, as
    /// [`crate::Agent::card_limits`] gives them.
    pub fn with_limits(mut self, limits: (u64, u64)) -> Self {
        self.limits = limits;
        self
    }

    fn done(
        &mut self,
        result: Result<AgentCard, Error>,
    ) -> crate::host::driver::Step<Result<AgentCard, Error>> {
        self.request = None;
        self.body = Vec::new();
        crate::host::driver::Step::Done(result)
    }

    fn failed(&self, e: crate::error::TransportError) -> Error {
        Error::Transport(TransportError::with_source(
            format!("fetching the Agent Card {} failed: {e}", self.url),
            e,
        ))
    }

    /// The card in a whole answer.
    fn read(&self, resp: crate::wire::http::HttpResponse) -> Result<AgentCard, Error> {
        if !resp.is_success() {
            return Err(Error::Status {
                status: resp.status,
                url: self.url.clone(),
                body: resp.body_snippet(200),
            });
        }
        AgentCard::parse_limited(&resp.body, self.limits.0, self.limits.1).map_err(|e| match e {
            // The reason keeps its cause (the JSON error) with the URL added.
            Error::Malformed(r) => {
                Error::Malformed(r.map(|m| format!("{m} ({})", self.url), |_| true))
            }
            e => Error::malformed(format!("{} ({})", e, self.url)),
        })
    }
}

impl crate::host::driver::Machine for CardMachine {
    type Output = Result<AgentCard, Error>;
    type Event = std::convert::Infallible;
    type Work = std::convert::Infallible;
    type Worked = std::convert::Infallible;

    fn start(&mut self, now_ms: u64) -> crate::host::driver::Step<Self::Output> {
        self.deadline_ms = now_ms.saturating_add(self.timeout_ms);
        match self.request.take() {
            // Streamed, so a body past the limit is never read whole.
            Some(request) => crate::host::driver::Step::Stream {
                request,
                deadline_ms: self.deadline_ms,
            },
            None => self.done(Err(Error::Misuse("CardMachine started twice".into()))),
        }
    }

    fn handle_response(
        &mut self,
        _now_ms: u64,
        response: Result<crate::wire::http::HttpResponse, crate::error::TransportError>,
    ) -> crate::host::driver::Step<Self::Output> {
        let result = match response {
            Err(e) => Err(self.failed(e)),
            Ok(resp) => self.read(resp),
        };
        self.done(result)
    }

    fn handle_head(
        &mut self,
        _now_ms: u64,
        head: Result<crate::host::driver::ResponseHead, crate::error::TransportError>,
    ) -> crate::host::driver::Step<Self::Output> {
        match head {
            Err(e) => {
                let e = self.failed(e);
                self.done(Err(e))
            }
            Ok(head) => {
                self.status = head.status;
                crate::host::driver::Step::Read {
                    deadline_ms: self.deadline_ms,
                }
            }
        }
    }

    fn handle_body(
        &mut self,
        _now_ms: u64,
        chunk: Result<Option<Vec<u8>>, crate::error::TransportError>,
    ) -> crate::host::driver::Step<Self::Output> {
        let result = match chunk {
            Ok(Some(bytes)) if (self.body.len() + bytes.len()) as u64 <= self.limits.0 => {
                self.body.extend_from_slice(&bytes);
                return crate::host::driver::Step::Read {
                    deadline_ms: self.deadline_ms,
                };
            }
            // Past the limit: stop reading (the driver drops the rest).
            Ok(Some(_)) if (200..300).contains(&self.status) => Err(Error::malformed(format!(
                "{} ({})",
                over_limit(self.limits.0),
                self.url
            ))),
            // A refusal's start is enough to tell it.
            Ok(Some(_) | None) => {
                let resp = crate::wire::http::HttpResponse {
                    status: self.status,
                    headers: Vec::new(),
                    body: std::mem::take(&mut self.body),
                };
                self.read(resp)
            }
            Err(e) => Err(self.failed(e)),
        };
        self.done(result)
    }

    fn handle_timeout(&mut self, _now_ms: u64) -> crate::host::driver::Step<Self::Output> {
        let msg = format!(
            "fetching the Agent Card {} timed out after {}ms",
            self.url, self.timeout_ms
        );
        self.done(Err(Error::transport(msg)))
    }

    fn handle_abort(&mut self, _now_ms: u64) -> crate::host::driver::Step<Self::Output> {
        let msg = format!("fetching the Agent Card {} was aborted", self.url);
        self.done(Err(Error::transport(msg)))
    }

    fn poll_event(&mut self) -> Option<Self::Event> {
        None
    }

    fn handle_work(
        &mut self,
        _now_ms: u64,
        worked: std::convert::Infallible,
    ) -> crate::host::driver::Step<Self::Output> {
        match worked {}
    }
}

#[cfg(test)]
mod binding_tests {
    use super::*;
    use crate::wire::rest::Binding;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    const CARD_URL: &str = "http://127.0.0.1:9/.well-known/agent-card.json";

    fn card(v: Value) -> AgentCard {
        AgentCard::from_value(&v).expect("a card")
    }

    #[test]
    fn json_rpc_first_then_http_json_unless_preferred() {
        let both = card(json!({"name": "n", "supportedInterfaces": [
            {"url": "http://127.0.0.1:9/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "http://127.0.0.1:9/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0", "tenant": "acme"}]}));
        assert_eq!(
            both.endpoint(CARD_URL),
            (Dialect::V10, "http://127.0.0.1:9/".into())
        );
        assert_eq!(
            both.endpoint_for(CARD_URL, Some(Binding::JsonRpc)),
            (Dialect::V10, "http://127.0.0.1:9/".into())
        );
        assert_eq!(
            both.endpoint_for(CARD_URL, Some(Binding::Rest)),
            (Dialect::Rest10, "http://127.0.0.1:9/rest/acme".into()),
            "the tenant is the first path segment"
        );
        let rest_only = card(json!({"name": "n", "supportedInterfaces": [
            {"url": "/api", "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
            {"url": "/api", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]}));
        assert_eq!(
            rest_only.endpoint(CARD_URL),
            (Dialect::Rest10, "http://127.0.0.1:9/api".into())
        );
        // A 0.3 card: `url` + `preferredTransport` HTTP+JSON, `additionalInterfaces`.
        let v03 = card(
            json!({"name": "n", "protocolVersion": "0.3.0", "url": "http://127.0.0.1:9/r",
            "preferredTransport": "HTTP+JSON",
            "additionalInterfaces": [{"url": "http://127.0.0.1:9/r", "transport": "HTTP+JSON"}]}),
        );
        assert_eq!(
            v03.endpoint(CARD_URL),
            (Dialect::Rest03, "http://127.0.0.1:9/r".into())
        );
        // Preferring REST on a card without it keeps JSON-RPC.
        let rpc = card(
            json!({"name": "n", "url": "http://127.0.0.1:9/", "preferredTransport": "JSONRPC"}),
        );
        assert_eq!(
            rpc.endpoint_for(CARD_URL, Some(Binding::Rest)),
            (Dialect::V03, "http://127.0.0.1:9/".into())
        );
    }
}
