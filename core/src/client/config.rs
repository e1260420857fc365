//! The `agents` config block.

use crate::model::agent::Agent;
use serde_json::Value;
use std::time::Duration;

/// Parses an `agents` block `{ "<id>": {card, headers?, auth?, allowedOrigins?,
/// timeout?, pollEvery?, enabled?, disabled?, conversational?, binding?} }` into
/// descriptors, in the block's order. `auth` is `{"bearer": ".."}`,
/// `{"apiKey": ".."}` or `{"oauth2": {clientId, clientSecret, tokenUrl?,
/// scopes?}}` (see [`crate::Auth::from_value`]); `binding` is `jsonrpc` or `rest`.
///
/// Entries without a string `card` are skipped. `disabled: true` wins, then
/// `enabled: false`; anything else is enabled. `null` (or any non-object)
/// gives an empty list. Fields of the wrong type are ignored, so defaults
/// apply. The key is only an identifier: tool names come from the card.
pub fn parse_agents_config(block: &Value) -> Vec<Agent> {
    let Some(entries) = block.as_object() else {
        return Vec::new();
    };
    // A plain loop, not a `filter_map(..).collect()` chain (see ARCHITECTURE.md).
    let mut agents = Vec::new();
    for entry in entries.values() {
        if let Some(agent) = config_entry(entry) {
            agents.push(agent);
        }
    }
    agents
}

/// One entry of the `agents` block, or `None` to skip it.
fn config_entry(entry: &Value) -> Option<Agent> {
    let card = entry.get("card")?.as_str()?;
    let flag = |k: &str| entry.get(k).and_then(Value::as_bool);
    if flag("disabled") == Some(true) || flag("enabled") == Some(false) {
        return None;
    }
    let millis = |k: &str| {
        entry
            .get(k)
            .and_then(Value::as_u64)
            .map(Duration::from_millis)
    };
    // A plain loop, not a `filter_map(..).collect()` chain (its own
    // iterator code in the client `.wasm`).
    let mut headers = Vec::new();
    if let Some(h) = entry.get("headers").and_then(Value::as_object) {
        for (k, v) in h {
            if let Value::String(v) = v {
                headers.push((k.clone(), v.clone()));
            }
        }
    }
    let mut agent = Agent::new(card);
    agent.headers = headers;
    agent.timeout = millis("timeout");
    agent.poll_every = millis("pollEvery");
    agent.max_card_bytes = entry.get("maxCardBytes").and_then(Value::as_u64);
    agent.max_skills = entry.get("maxSkills").and_then(Value::as_u64);
    agent.allow_insecure_headers = flag("allowInsecureHeaders") == Some(true);
    agent.auth = entry.get("auth").and_then(crate::Auth::from_value);
    agent.allowed_origins = crate::wire::json::strings(entry.get("allowedOrigins"));
    agent.conversational = entry.get("conversational").and_then(Value::as_bool) == Some(true);
    // `"binding": "rest"` prefers HTTP+JSON; `"jsonrpc"` (the default) JSON-RPC.
    agent.binding = entry
        .get("binding")
        .and_then(Value::as_str)
        .and_then(crate::wire::rest::Binding::parse);
    Some(agent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    // Seed 002, example 1.
    #[test]
    fn one_card_only_entry_leaves_fields_unset() {
        let parsed = parse_agents_config(
            &json!({"librarian": {"card": "https://library.internal/.well-known/agent-card.json"}}),
        );
        assert_eq!(parsed.len(), 1);
        assert_eq!(
            parsed[0].card,
            "https://library.internal/.well-known/agent-card.json"
        );
        assert_eq!(parsed[0].timeout, None);
        assert_eq!(parsed[0].poll_every, None);
        assert!(parsed[0].headers.is_empty());
    }

    // Seed 002, example 2.
    #[test]
    fn disabled_wins_then_enabled_false() {
        let parsed = parse_agents_config(&json!({
            "keep": {"card": "http://x/1"},
            "skippedByDisabled": {"card": "http://x/2", "disabled": true},
            "skippedByEnabledFalse": {"card": "http://x/3", "enabled": false},
            "skippedPrecedence": {"card": "http://x/4", "enabled": true, "disabled": true},
            "keptExplicitEnabled": {"card": "http://x/5", "enabled": true},
        }));
        let mut cards: Vec<_> = parsed.iter().map(|a| a.card.as_str()).collect();
        cards.sort();
        assert_eq!(cards, ["http://x/1", "http://x/5"]);
    }

    // Seed 002, example 3 (the parse half; the toolkit half is a host test).
    #[test]
    fn carries_headers_timeout_and_poll_every() {
        let parsed = parse_agents_config(&json!({"planner": {
            "card": "http://127.0.0.1:1/.well-known/agent-card.json",
            "timeout": 5000, "pollEvery": 10, "headers": {"X-Trace": "abc"}}}));
        assert_eq!(parsed[0].timeout, Some(Duration::from_millis(5000)));
        assert_eq!(parsed[0].poll_every, Some(Duration::from_millis(10)));
        assert_eq!(
            parsed[0].headers,
            vec![("X-Trace".to_string(), "abc".to_string())]
        );
    }

    #[test]
    fn null_and_junk_give_nothing_and_never_panic() {
        assert!(parse_agents_config(&Value::Null).is_empty());
        assert!(parse_agents_config(&json!([1, 2])).is_empty());
        let parsed = parse_agents_config(&json!({
            "noCard": {"headers": {}},
            "numCard": {"card": 7},
            "notObject": "http://x",
            "badTypes": {"card": "http://x/ok", "timeout": "soon", "pollEvery": -1,
                         "headers": {"A": 1, "B": "b"}, "disabled": "yes"},
        }));
        assert_eq!(parsed.len(), 1);
        assert_eq!(parsed[0].card, "http://x/ok");
        assert_eq!((parsed[0].timeout, parsed[0].poll_every), (None, None));
        assert_eq!(parsed[0].headers, vec![("B".to_string(), "b".to_string())]);
    }

    #[test]
    fn reads_each_auth_shape_and_the_allowed_origins() {
        let parsed = parse_agents_config(&json!({
            "a": {"card": "http://x/1", "auth": {"bearer": "${TOKEN}"},
                  "allowedOrigins": ["https://api.example", 7]},
            "b": {"card": "http://x/2", "auth": {"apiKey": "${KEY}"}},
            "c": {"card": "http://x/3", "auth": {"oauth2": {"clientId": "app",
                  "clientSecret": "${SECRET}", "scopes": ["read", 1, "write"]}}},
            "d": {"card": "http://x/4", "auth": {"oauth2": {"clientSecret": "no id"}}},
            "e": {"card": "http://x/5", "auth": "bearer"},
        }));
        assert_eq!(parsed[0].auth, Some(crate::Auth::Bearer("${TOKEN}".into())));
        assert_eq!(parsed[0].allowed_origins, ["https://api.example"]);
        assert_eq!(parsed[1].auth, Some(crate::Auth::ApiKey("${KEY}".into())));
        assert_eq!(
            parsed[2].auth,
            Some(crate::Auth::OAuth2(crate::OAuth2Client {
                client_id: "app".into(),
                client_secret: "${SECRET}".into(),
                token_url: None,
                scopes: vec!["read".into(), "write".into()],
            }))
        );
        assert_eq!(
            (parsed[3].auth.clone(), parsed[4].auth.clone()),
            (None, None)
        );
    }

    #[test]
    fn keeps_the_block_order() {
        let parsed = parse_agents_config(&json!({"z": {"card": "1"}, "a": {"card": "2"}}));
        assert_eq!(
            parsed.iter().map(|a| a.card.as_str()).collect::<Vec<_>>(),
            ["1", "2"]
        );
    }
}
