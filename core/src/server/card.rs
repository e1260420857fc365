//! The served Agent Card.

use crate::skills::Skill;
use serde_json::{json, Map, Value};

/// Who runs the agent.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Provider {
    pub organization: String,
    pub url: String,
}

/// The agent's identity on its card. Every field is optional; see [`build_agent_card`].
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(default)]
pub struct A2aConfig {
    pub name: Option<String>,
    pub description: Option<String>,
    pub version: Option<String>,
    pub provider: Option<Provider>,
    /// Allowlist of skill names to advertise; `None` advertises all.
    pub skills: Option<Vec<String>>,
    /// Advertise `capabilities.pushNotifications` (the server must offer
    /// them: [`super::ServerOptions::push`]).
    pub push_notifications: bool,
}

/// The card name used when none is configured.
pub const DEFAULT_NAME: &str = "toolnexus-agent";
/// The card version used when none is configured.
pub const DEFAULT_VERSION: &str = "0.1.0";

/// Builds the Agent Card served at `GET /.well-known/agent-card.json`. Pure.
///
/// Defaults: name `toolnexus-agent`, description `""`, version `0.1.0`,
/// protocolVersion `0.3.0`, streaming (SSE) but no push notifications, text in and
/// out. `provider` only when configured. One `{id, name, description, tags}`
/// per skill, id == name, narrowed by the `skills` allowlist (unknown names
/// are ignored). `url` is the JSON-RPC endpoint.
///
/// The card is a hybrid that official A2A 0.3 and 1.0 clients both accept:
/// top-level `url` and `preferredTransport` for 0.3, and `supportedInterfaces`
/// for 1.0 and 0.3 at the same URL.
pub fn build_agent_card(cfg: &A2aConfig, skills: &[Skill], url: &str) -> Value {
    let advertised: Vec<Value> = skills
        .iter()
        .filter(|s| {
            cfg.skills
                .as_ref()
                .is_none_or(|allow| allow.iter().any(|a| a == &s.name))
        })
        .map(|s| json!({"id": s.name, "name": s.name, "description": s.description, "tags": []}))
        .collect();
    let mut card = Map::new();
    let mut put = |k: &str, v: Value| {
        card.insert(k.to_string(), v);
    };
    put("name", cfg.name.as_deref().unwrap_or(DEFAULT_NAME).into());
    put(
        "description",
        cfg.description.as_deref().unwrap_or("").into(),
    );
    put(
        "version",
        cfg.version.as_deref().unwrap_or(DEFAULT_VERSION).into(),
    );
    put("protocolVersion", "0.3.0".into());
    put("url", url.into());
    put("preferredTransport", "JSONRPC".into());
    put(
        "supportedInterfaces",
        json!([
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ]),
    );
    put(
        "capabilities",
        json!({"streaming": true, "pushNotifications": cfg.push_notifications, "extensions": [{
            "uri": crate::client::card::LONG_POLL_EXTENSION,
            "description": "GetTask honours Prefer: wait=N (RFC 7240): it answers when the task settles or after N seconds",
            "required": false,
        }]}),
    );
    // Modes are media types (A2A 1.0). Files and data parts are taken too
    // (kept in the task, described to the model); answers are text.
    put(
        "defaultInputModes",
        json!(["text/plain", "application/json"]),
    );
    put("defaultOutputModes", json!(["text/plain"]));
    if let Some(p) = &cfg.provider {
        put(
            "provider",
            json!({"organization": p.organization, "url": p.url}),
        );
    }
    put("skills", Value::Array(advertised));
    Value::Object(card)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn skill(name: &str) -> Skill {
        Skill {
            name: name.into(),
            description: format!("{name} skill"),
            content: String::new(),
        }
    }

    // Seed 001, example 1: defaults with no config.
    #[test]
    fn defaults_with_no_config() {
        let card = build_agent_card(&A2aConfig::default(), &[], "http://127.0.0.1:8080/");
        assert_eq!(card["name"], "toolnexus-agent");
        assert_eq!(card["description"], "");
        assert_eq!(card["version"], "0.1.0");
        assert_eq!(card["protocolVersion"], "0.3.0");
        assert_eq!(card["url"], "http://127.0.0.1:8080/");
        assert_eq!(card["skills"], json!([]));
        assert_eq!(card["capabilities"]["streaming"], true);
        assert_eq!(card["capabilities"]["pushNotifications"], false);
        assert_eq!(
            card["capabilities"]["extensions"][0]["uri"],
            crate::client::card::LONG_POLL_EXTENSION
        );
        assert_eq!(
            card["defaultInputModes"],
            json!(["text/plain", "application/json"])
        );
        assert_eq!(card["defaultOutputModes"], json!(["text/plain"]));
        assert!(card.get("provider").is_none());
    }

    // Seed 001, example 2: skills filtered by the allowlist; id == name.
    #[test]
    fn skills_filtered_by_the_allowlist() {
        let cfg = A2aConfig {
            name: Some("front-desk".into()),
            description: Some("Handles routine requests".into()),
            skills: Some(vec!["hello-world".into(), "does-not-exist".into()]),
            ..Default::default()
        };
        let card = build_agent_card(
            &cfg,
            &[skill("hello-world"), skill("other")],
            "http://127.0.0.1:0/",
        );
        let got = card["skills"].as_array().expect("skills");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0]["id"], got[0]["name"]);
        assert_eq!(got[0]["id"], "hello-world");
        assert_eq!(got[0]["tags"], json!([]));
    }

    // Seed 001, example 3 (the pure half): every field filled in.
    #[test]
    fn provider_only_when_configured() {
        let cfg = A2aConfig {
            name: Some("front-desk".into()),
            version: Some("2.3.0".into()),
            provider: Some(Provider {
                organization: "Acme Corp".into(),
                url: "https://acme.example".into(),
            }),
            ..Default::default()
        };
        let card = build_agent_card(&cfg, &[], "http://h/");
        assert_eq!(
            card["provider"],
            json!({"organization": "Acme Corp", "url": "https://acme.example"})
        );
        assert_eq!(card["version"], "2.3.0");
    }

    #[test]
    fn the_card_is_a_hybrid_both_protocols_read() {
        let card = build_agent_card(&A2aConfig::default(), &[skill("s")], "http://h:1/");
        let parsed =
            crate::client::card::AgentCard::from_value(&card).expect("our own reader accepts it");
        assert_eq!(
            parsed.endpoint("http://h:1/.well-known/agent-card.json"),
            (crate::Dialect::V10, "http://h:1/".into())
        );
        assert_eq!(card["preferredTransport"], "JSONRPC");
        assert_eq!(card["supportedInterfaces"][1]["protocolVersion"], "0.3");
    }
}
