//! The served Agent Card.

use super::auth::AuthConfig;
use crate::skills::Skill;
use crate::wire::json::object;
use serde_json::{Map, Value};

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
    /// The bindings offered (`jsonrpc`, `rest`); `None`: both. HTTP+JSON is
    /// served at `<url>rest` ([`super::rest::REST_PATH`]).
    pub bindings: Option<Vec<String>>,
    /// The tenant the card's interfaces name (`AgentInterface.tenant`):
    /// clients send it as the first path segment of every HTTP+JSON request.
    pub tenant: Option<String>,
    /// Who may call (the `auth` key, [`AuthConfig::from_value`]): the card
    /// then declares its `securitySchemes` and an extended card. Not read
    /// by the derived `Deserialize` (its keys need the environment): read
    /// it with [`A2aConfig::from_value_with_env`].
    #[serde(skip)]
    pub auth: Option<AuthConfig>,
    /// Serve HTTP+JSON at the card URL itself (`<url>message:send`, beside
    /// JSON-RPC's `POST <url>`) instead of under [`super::rest::REST_PATH`]:
    /// for a server with nothing else at its root (no UI), and for clients
    /// that drop the interface URL's path (the official TCK's REST client
    /// does). Not read from the config file.
    #[serde(skip)]
    pub rest_at_root: bool,
}

/// Every item of `list` as a string, or `None` if one is not a string.
fn strings_only(list: &[Value]) -> Option<Vec<String>> {
    // A plain loop, not an iterator chain (see ARCHITECTURE.md).
    let mut out = Vec::with_capacity(list.len());
    for s in list {
        out.push(s.as_str()?.to_string());
    }
    Some(out)
}

impl A2aConfig {
    /// Reads the config as its derived `Deserialize` does from an object
    /// (every field optional, unknown ones ignored), without serde's error
    /// path (see [`crate::wire::json::opt_string`]).
    /// An `auth` key is read with no environment: `${NAME}` in it expands
    /// to nothing, which is refused (use [`A2aConfig::from_value_with_env`]).
    pub fn from_value(v: &Value) -> Result<A2aConfig, String> {
        Self::from_value_with_env(v, |_| None)
    }

    /// [`A2aConfig::from_value`], with the `auth` key's `${NAME}`s expanded
    /// through `env`.
    pub fn from_value_with_env(
        v: &Value,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<A2aConfig, String> {
        use crate::wire::json::{opt_string, read_object, string_or};
        read_object(v, |v| {
            let provider = match v.get("provider") {
                None | Some(Value::Null) => None,
                Some(p) => Some(read_object(p, |p| {
                    Ok(Provider {
                        organization: string_or(p, "organization", None)?,
                        url: string_or(p, "url", None)?,
                    })
                })?),
            };
            let skills = match v.get("skills") {
                None | Some(Value::Null) => None,
                Some(Value::Array(list)) => {
                    Some(strings_only(list).ok_or("`skills` must be an array of strings")?)
                }
                Some(_) => return Err("`skills` must be an array of strings".into()),
            };
            let push_notifications = match v.get("push_notifications") {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err("`push_notifications` must be a boolean".into()),
            };
            let bindings = match v.get("bindings") {
                None | Some(Value::Null) => None,
                Some(Value::Array(list)) => {
                    Some(strings_only(list).ok_or("`bindings` must be an array of strings")?)
                }
                Some(_) => return Err("`bindings` must be an array of strings".into()),
            };
            let auth = match v.get("auth") {
                None | Some(Value::Null) => None,
                Some(a) => Some(AuthConfig::from_value(a, env)?),
            };
            Ok(A2aConfig {
                rest_at_root: false,
                bindings,
                tenant: opt_string(v, "tenant")?,
                auth,
                name: opt_string(v, "name")?,
                description: opt_string(v, "description")?,
                version: opt_string(v, "version")?,
                provider,
                skills,
                push_notifications,
            })
        })
    }
}

impl A2aConfig {
    /// The bindings offered: both unless `bindings` names some (unknown
    /// names are ignored; naming none known offers JSON-RPC).
    pub fn bindings(&self) -> super::rest::Bindings {
        match &self.bindings {
            None => super::rest::Bindings::default(),
            Some(list) => {
                super::rest::Bindings::parse(&list.join(",")).unwrap_or(super::rest::Bindings {
                    jsonrpc: true,
                    rest: false,
                })
            }
        }
    }
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
    let mut advertised: Vec<Value> = Vec::new();
    // A plain loop, not an iterator chain (see ARCHITECTURE.md).
    for s in skills {
        if cfg
            .skills
            .as_ref()
            .is_none_or(|allow| allow.iter().any(|a| a == &s.name))
        {
            advertised.push(object([
                ("id", s.name.as_str().into()),
                ("name", s.name.as_str().into()),
                ("description", s.description.as_str().into()),
                ("tags", Value::Array(Vec::new())),
            ]));
        }
    }
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
    let bindings = cfg.bindings();
    let rest_url = if cfg.rest_at_root {
        url.to_string()
    } else {
        format!("{}{}", url.trim_end_matches('/'), super::rest::REST_PATH)
    };
    let mut interfaces = Vec::new();
    let mut additional = Vec::new();
    for (offered, binding, at) in [
        (bindings.jsonrpc, "JSONRPC", url),
        (bindings.rest, "HTTP+JSON", rest_url.as_str()),
    ] {
        if !offered {
            continue;
        }
        for v in ["1.0", "0.3"] {
            let mut i = object([
                ("url", at.into()),
                ("protocolBinding", binding.into()),
                ("protocolVersion", v.into()),
            ]);
            if let (Some(t), Some(o)) = (&cfg.tenant, i.as_object_mut()) {
                o.insert("tenant".into(), t.as_str().into());
            }
            interfaces.push(i);
        }
        additional.push(object([("url", at.into()), ("transport", binding.into())]));
    }
    let (main_url, main_binding) = if bindings.jsonrpc {
        (url, "JSONRPC")
    } else {
        (rest_url.as_str(), "HTTP+JSON")
    };
    put("protocolVersion", "0.3.0".into());
    put("url", main_url.into());
    put("preferredTransport", main_binding.into());
    put("supportedInterfaces", Value::Array(interfaces));
    put("additionalInterfaces", Value::Array(additional));
    put(
        "capabilities",
        object([
            ("streaming", true.into()),
            ("pushNotifications", cfg.push_notifications.into()),
            ("extensions", Value::Array(vec![object([
                ("uri", crate::client::card::LONG_POLL_EXTENSION.into()),
                ("description", "GetTask honours Prefer: wait=N (RFC 7240): it answers when the task settles or after N seconds".into()),
                ("required", false.into()),
            ])])),
        ]),
    );
    // Modes are media types (A2A 1.0). Files and data parts are taken too
    // (kept in the task, described to the model); answers are text.
    put(
        "defaultInputModes",
        Value::Array(vec!["text/plain".into(), "application/json".into()]),
    );
    put(
        "defaultOutputModes",
        Value::Array(vec!["text/plain".into()]),
    );
    if let Some(p) = &cfg.provider {
        put(
            "provider",
            object([
                ("organization", p.organization.as_str().into()),
                ("url", p.url.as_str().into()),
            ]),
        );
    }
    put("skills", Value::Array(advertised));
    let mut card = Value::Object(card);
    declare_auth(&mut card, cfg.auth.as_ref());
    card
}

/// The names of the schemes the card declares.
pub const API_KEY_SCHEME: &str = "apiKey";
/// The JWT verifier's scheme when its keys come from `jwksUrl` or a secret.
pub const BEARER_SCHEME: &str = "bearer";
/// The JWT verifier's scheme when its keys come from the issuer's discovery document.
pub const OIDC_SCHEME: &str = "oidc";

/// The schemes `auth` enforces, each as `(name, scheme, scopes)`, the
/// scheme in both shapes at once: the 1.0 field (`apiKeySecurityScheme`,
/// `httpAuthSecurityScheme`, `openIdConnectSecurityScheme`) beside the
/// 0.3 `type` and its fields. [`card_for`] keeps one of them for the
/// version a card request asks for. A custom verifier declares no scheme.
fn schemes(auth: &AuthConfig) -> Vec<(&'static str, Value, Vec<String>)> {
    use super::auth::KeyLocation;
    let mut out = Vec::new();
    if let Some(keys) = &auth.api_keys {
        let location = match keys.location {
            KeyLocation::Header => "header",
            KeyLocation::Query => "query",
            KeyLocation::Cookie => "cookie",
        };
        let description = "An API key naming the caller";
        out.push((
            API_KEY_SCHEME,
            object([
                ("type", "apiKey".into()),
                ("in", location.into()),
                ("name", keys.name.as_str().into()),
                ("description", description.into()),
                (
                    "apiKeySecurityScheme",
                    object([
                        ("location", location.into()),
                        // OpenAPI's name for `location`: the official TCK
                        // requires it here; 1.0 readers ignore it.
                        ("in", location.into()),
                        ("name", keys.name.as_str().into()),
                        ("description", description.into()),
                    ]),
                ),
            ]),
            Vec::new(),
        ));
    }
    if let Some(jwt) = &auth.jwt {
        let scopes = jwt.required_scopes.clone();
        match (&jwt.issuer, &jwt.jwks_url) {
            // Keys from the issuer's discovery document: it is an OpenID provider.
            (Some(issuer), None) if jwt.secret_env.is_none() => {
                let url = format!(
                    "{}/.well-known/openid-configuration",
                    issuer.trim_end_matches('/')
                );
                out.push((
                    OIDC_SCHEME,
                    object([
                        ("type", "openIdConnect".into()),
                        ("openIdConnectUrl", url.as_str().into()),
                        (
                            "openIdConnectSecurityScheme",
                            object([("openIdConnectUrl", url.into())]),
                        ),
                    ]),
                    scopes,
                ));
            }
            _ => out.push((
                BEARER_SCHEME,
                object([
                    ("type", "http".into()),
                    ("scheme", "bearer".into()),
                    ("bearerFormat", "JWT".into()),
                    (
                        "httpAuthSecurityScheme",
                        object([("scheme", "Bearer".into()), ("bearerFormat", "JWT".into())]),
                    ),
                ]),
                scopes,
            )),
        }
    }
    out
}

/// Writes onto `card` what `auth` enforces (nothing when `None`): its
/// `securitySchemes`, one alternative per scheme in the 1.0
/// `securityRequirements` (`[{schemes: {name: {list: scopes}}}]`) and the
/// 0.3 `security` (`[{name: scopes}]`), and the extended card
/// (`capabilities.extendedAgentCard`, 0.3's `supportsAuthenticatedExtendedCard`).
pub(crate) fn declare_auth(card: &mut Value, auth: Option<&AuthConfig>) {
    let (Some(auth), Some(map)) = (auth, card.as_object_mut()) else {
        return;
    };
    let schemes = schemes(auth);
    let scopes = |s: &[String]| Value::Array(s.iter().map(|s| s.as_str().into()).collect());
    let mut declared = Map::new();
    let mut requirements = Vec::new();
    let mut security = Vec::new();
    for (name, scheme, list) in schemes {
        declared.insert(name.into(), scheme);
        let mut one = Map::new();
        one.insert(name.into(), object([("list", scopes(&list))]));
        requirements.push(object([("schemes", Value::Object(one))]));
        let mut one = Map::new();
        one.insert(name.into(), scopes(&list));
        security.push(Value::Object(one));
    }
    if !declared.is_empty() {
        map.insert("securitySchemes".into(), Value::Object(declared));
        map.insert("securityRequirements".into(), Value::Array(requirements));
        map.insert("security".into(), Value::Array(security));
    }
    map.insert("supportsAuthenticatedExtendedCard".into(), true.into());
    if let Some(caps) = map
        .entry("capabilities")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
    {
        caps.insert("extendedAgentCard".into(), true.into());
    }
}

/// The 1.0 `SecurityScheme` fields, one per kind (a proto `oneof`).
const SCHEME_WRAPPERS: [&str; 5] = [
    "apiKeySecurityScheme",
    "httpAuthSecurityScheme",
    "oauth2SecurityScheme",
    "openIdConnectSecurityScheme",
    "mtlsSecurityScheme",
];

/// `card` as the protocol version `shape` reads it. A card's security
/// schemes cannot be written for both at once: a 1.0 `SecurityScheme` is
/// an object with exactly one field naming its kind (the official TCK
/// checks that there is exactly one), a 0.3 one is an OpenAPI object
/// with a `type`. So the card keeps, for 1.0, each scheme's 1.0 field
/// and `securityRequirements`; for 0.3, each scheme's `type` and fields
/// and `security`. A scheme written in one version only, and every other
/// field, stay as they are (the 0.3 connection fields `url`,
/// `preferredTransport`, `protocolVersion` sit beside the 1.0 ones without
/// conflict, as the official Python SDK's own card has them). Pure.
pub fn card_for(card: &Value, shape: crate::Shape) -> Value {
    let mut card = card.clone();
    let Some(map) = card.as_object_mut() else {
        return card;
    };
    let v10 = shape == crate::Shape::V10;
    if let Some(schemes) = map
        .get_mut("securitySchemes")
        .and_then(Value::as_object_mut)
    {
        for scheme in schemes.values_mut() {
            let Some(fields) = scheme.as_object_mut() else {
                continue;
            };
            let Some(kind) = SCHEME_WRAPPERS.iter().find(|w| fields.contains_key(**w)) else {
                continue;
            };
            if !fields.contains_key("type") {
                continue;
            }
            if v10 {
                fields.retain(|k, _| k == kind);
            } else {
                fields.retain(|k, _| !SCHEME_WRAPPERS.contains(&k.as_str()));
            }
        }
    }
    if map.contains_key("security") && map.contains_key("securityRequirements") {
        map.remove(if v10 {
            "security"
        } else {
            "securityRequirements"
        });
    }
    card
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn from_value_reads_what_the_derived_deserialize_reads() {
        for v in [
            json!({}),
            json!({"name": "a", "description": null, "version": "2", "extra": 1}),
            json!({"provider": {"organization": "o", "url": "u"}, "skills": ["x", "y"]}),
            json!({"provider": null, "skills": null, "push_notifications": true}),
            json!({"provider": {"organization": "o"}}),
            json!({"provider": {"organization": "o", "url": 3}}),
            json!({"provider": "acme"}),
            json!({"skills": ["x", 1]}),
            json!({"skills": "x"}),
            json!({"name": 5}),
            json!({"push_notifications": null}),
            json!({"push_notifications": "yes"}),
            json!("config"),
            json!(7),
            json!(null),
        ] {
            let derived = serde_json::from_value::<A2aConfig>(v.clone()).map_err(|_| ());
            assert_eq!(A2aConfig::from_value(&v).map_err(|_| ()), derived, "{v}");
        }
    }

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

    #[test]
    fn a_scheme_written_in_one_version_only_is_kept_for_both() {
        let card = json!({"securitySchemes": {
            "old": {"type": "http", "scheme": "bearer"},
            "new": {"oauth2SecurityScheme": {"flows": {}}},
            "odd": "not an object",
        }, "security": [{"old": []}]});
        for shape in [crate::Shape::V10, crate::Shape::V03] {
            assert_eq!(card_for(&card, shape), card, "{shape:?}");
        }
        assert_eq!(card_for(&json!([1]), crate::Shape::V10), json!([1]));
    }
}
