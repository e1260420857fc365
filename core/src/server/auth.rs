//! Who is calling: the caller's [`Principal`], decided by core from the
//! credentials a request carries, and the policy that answers a request
//! without one (401 with `WWW-Authenticate`, or 403).
//!
//! The host hands core the request; core reads its credentials (an API key
//! in a header, query parameter or cookie; a bearer token), asks the
//! verifiers ([`AuthConfig`]'s API keys, checked here in constant time; a
//! JWT, whose *signature* the host checks through
//! [`ServerHost::verify_jwt`](super::ServerHost::verify_jwt) and whose
//! *claims* core checks; a custom verifier,
//! [`ServerHost::authenticate`](super::ServerHost::authenticate)), and a
//! request passes when one of them accepts it.
//!
//! The `a2a.auth` block is read by [`AuthConfig::from_value`]; the card's
//! `securitySchemes` are derived from it ([`AuthConfig::card_schemes`]).

use crate::wire::json::quoted;
use serde_json::{Map, Value};

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Principal {
    /// Who: the API key's name, or the JWT's `sub`.
    pub subject: String,
    /// Who vouches for it: the JWT's `iss`; `None` for API keys.
    pub issuer: Option<String>,
    /// The tenant, when the verifier names one.
    pub tenant: Option<String>,
    /// What it may do: the JWT's `scope` / `scp`, or none.
    pub scopes: Vec<String>,
}

impl Principal {
    /// The owner stored with each task and push config this caller makes:
    /// the issuer and the subject together, so the same `sub` from two
    /// issuers is two owners.
    pub fn owner(&self) -> String {
        match &self.issuer {
            Some(iss) => {
                let mut s = String::with_capacity(iss.len() + 1 + self.subject.len());
                s.push_str(iss);
                s.push('\u{1f}');
                s.push_str(&self.subject);
                s
            }
            None => self.subject.clone(),
        }
    }
}

/// Where an API key travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyLocation {
    #[default]
    Header,
    Query,
    Cookie,
}

/// The `apiKeys` verifier: each key names a principal (its subject).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ApiKeys {
    /// `in`: header (default), query or cookie.
    pub location: KeyLocation,
    /// The header, query parameter or cookie name (default `X-API-Key`).
    pub name: String,
    /// `(subject, key)`, keys already expanded from `${NAME}`. Empty keys
    /// never match.
    pub keys: Vec<(String, String)>,
}

/// The `jwt` verifier's policy. The host checks signatures (with the
/// secret of `secret_env`, or the keys at `jwks_url` / the issuer's OIDC
/// discovery document); core checks the claims.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JwtConfig {
    /// Required `iss`.
    pub issuer: Option<String>,
    /// Required `aud` (a string, or one of an array).
    pub audience: Option<String>,
    /// Where the signing keys are (asymmetric algorithms).
    pub jwks_url: Option<String>,
    /// The accepted `alg`s (HS256, RS256, ES256, EdDSA). Never `none`.
    pub algorithms: Vec<String>,
    /// The environment variable holding the HS256 secret.
    pub secret_env: Option<String>,
    /// Leeway on `exp` / `nbf`, in seconds.
    pub leeway_seconds: u64,
    /// Scopes every caller must have.
    pub required_scopes: Vec<String>,
}

/// The `a2a.auth` block: the verifiers a server runs. The card's
/// `securitySchemes` and `securityRequirements` are derived from it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthConfig {
    pub api_keys: Option<ApiKeys>,
    pub jwt: Option<JwtConfig>,
    /// A custom verifier is configured ([`ServerHost::authenticate`](super::ServerHost::authenticate)).
    pub custom: bool,
}

/// The `alg`s a JWT verifier may accept (`none` never is).
pub const JWT_ALGORITHMS: [&str; 4] = ["HS256", "RS256", "ES256", "EdDSA"];

/// The default `leewaySeconds` of a `jwt` block.
pub const DEFAULT_LEEWAY_SECONDS: u64 = 30;

/// The largest `leewaySeconds` taken (an hour): more would make `exp` meaningless.
pub const MAX_LEEWAY_SECONDS: u64 = 3600;
// The leewaySeconds message names this figure in its text.
const _: () = assert!(MAX_LEEWAY_SECONDS == 3600);

/// The default API key header name.
pub const DEFAULT_KEY_NAME: &str = "X-API-Key";

impl AuthConfig {
    /// Reads the `a2a.auth` block:
    ///
    /// ```json
    /// {"apiKeys": {"in": "header", "name": "X-API-Key", "keys": {"alice": "${ALICE_KEY}"}},
    ///  "jwt": {"issuer": "…", "audience": "…", "jwksUrl": "…", "algorithms": ["RS256"],
    ///          "secretEnv": "NAME", "leewaySeconds": 30, "requiredScopes": []}}
    /// ```
    ///
    /// `${NAME}` in a key is expanded through `env` (core reads no
    /// environment: the host passes its own). Refused, with a message naming
    /// the place: unknown keys (a typo must not switch a verifier off), an
    /// empty key after expansion (naming its principal), two principals
    /// with one key, a block with no verifier, a `jwt` block with both or
    /// neither of `secretEnv` and `jwksUrl`/`issuer`, an `alg` outside
    /// [`JWT_ALGORITHMS`] (`none` among them), HS256 with asymmetric keys or
    /// an asymmetric `alg` with a secret (algorithm confusion), and a
    /// `secretEnv` that `env` does not set.
    pub fn from_value(
        v: &Value,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<AuthConfig, String> {
        Self::read(v, &env)
    }

    /// [`AuthConfig::from_value`], compiled once whatever the `env`.
    fn read(v: &Value, env: &dyn Fn(&str) -> Option<String>) -> Result<AuthConfig, String> {
        let block = object_of(v, "a2a.auth")?;
        only_keys(block, "a2a.auth", &["apiKeys", "jwt"])?;
        let api_keys = match block.get("apiKeys") {
            None | Some(Value::Null) => None,
            Some(k) => Some(read_api_keys(k, env)?),
        };
        let jwt = match block.get("jwt") {
            None | Some(Value::Null) => None,
            Some(j) => Some(read_jwt(j, env)?),
        };
        if api_keys.is_none() && jwt.is_none() {
            return Err("a2a.auth configures no verifier: give `apiKeys`, `jwt` or both".into());
        }
        Ok(AuthConfig {
            api_keys,
            jwt,
            custom: false,
        })
    }
}

/// A message from its pieces, not `format!`: one small shared function in
/// the npm `.wasm`, no formatting machinery per message.
pub(crate) fn say(pieces: &[&str]) -> String {
    let mut out = String::new();
    for piece in pieces {
        out.push_str(piece);
    }
    out
}

fn object_of<'a>(v: &'a Value, place: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| say(&[place, " must be an object"]))
}

fn only_keys(block: &Map<String, Value>, place: &str, known: &[&str]) -> Result<(), String> {
    match block.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(say(&[
            place,
            " has an unknown key ",
            &quoted(k),
            " (known: ",
            &known.join(", "),
            ")",
        ])),
        None => Ok(()),
    }
}

fn opt_text<'a>(
    block: &'a Map<String, Value>,
    place: &str,
    key: &str,
) -> Result<Option<&'a str>, String> {
    match block.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.as_str())),
        Some(_) => Err(say(&[place, ".", key, " must be a non-empty string"])),
    }
}

fn text_list(block: &Map<String, Value>, place: &str, key: &str) -> Result<Vec<String>, String> {
    match block.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(list)) => {
            // A plain loop, not an iterator chain (see ARCHITECTURE.md).
            let mut out = Vec::with_capacity(list.len());
            for s in list {
                match s {
                    Value::String(s) if !s.is_empty() => out.push(s.clone()),
                    _ => {
                        return Err(say(&[
                            place,
                            ".",
                            key,
                            " must be an array of non-empty strings",
                        ]))
                    }
                }
            }
            Ok(out)
        }
        Some(_) => Err(say(&[place, ".", key, " must be an array of strings"])),
    }
}

fn read_api_keys(v: &Value, env: &dyn Fn(&str) -> Option<String>) -> Result<ApiKeys, String> {
    const PLACE: &str = "a2a.auth.apiKeys";
    let block = object_of(v, PLACE)?;
    only_keys(block, PLACE, &["in", "name", "keys"])?;
    let location = match opt_text(block, PLACE, "in")? {
        None | Some("header") => KeyLocation::Header,
        Some("query") => KeyLocation::Query,
        Some("cookie") => KeyLocation::Cookie,
        Some(other) => {
            return Err(say(&[
                PLACE,
                ".in is ",
                &quoted(other),
                ": use \"header\", \"query\" or \"cookie\"",
            ]))
        }
    };
    let name = opt_text(block, PLACE, "name")?.unwrap_or(DEFAULT_KEY_NAME);
    // A header, parameter or cookie name is a token: no separators that
    // would let it be read as something else.
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err(say(&[
            PLACE,
            ".name ",
            &quoted(name),
            " may hold only letters, digits, '-', '_' and '.'",
        ]));
    }
    let keys =
        match block.get("keys") {
            Some(Value::Object(keys)) if !keys.is_empty() => keys,
            _ => return Err(say(&[
                PLACE,
                ".keys must be an object naming each caller's key: {\"alice\": \"${ALICE_KEY}\"}",
            ])),
        };
    let mut read: Vec<(String, String)> = Vec::with_capacity(keys.len());
    for (subject, key) in keys {
        let place = say(&[PLACE, ".keys.", &quoted(subject)]);
        if subject.trim().is_empty() {
            return Err(say(&[PLACE, ".keys names an empty principal"]));
        }
        let Value::String(key) = key else {
            return Err(say(&[&place, " must be a string"]));
        };
        let expanded = crate::model::agent::expand_with(key, env);
        if expanded.is_empty() {
            return Err(say(&[
                "the API key of ",
                &quoted(subject),
                " is empty (is the variable in ",
                &quoted(key),
                " set?): a key that is empty never matches, so it is refused",
            ]));
        }
        if read.iter().any(|(_, k)| *k == expanded) {
            return Err(say(&[
                &place,
                ": two principals have the same key, so a caller could not be told apart",
            ]));
        }
        read.push((subject.clone(), expanded));
    }
    Ok(ApiKeys {
        location,
        name: name.to_string(),
        keys: read,
    })
}

fn read_jwt(v: &Value, env: &dyn Fn(&str) -> Option<String>) -> Result<JwtConfig, String> {
    const PLACE: &str = "a2a.auth.jwt";
    let block = object_of(v, PLACE)?;
    only_keys(
        block,
        PLACE,
        &[
            "issuer",
            "audience",
            "jwksUrl",
            "algorithms",
            "secretEnv",
            "leewaySeconds",
            "requiredScopes",
        ],
    )?;
    let owned = |s: Option<&str>| s.map(str::to_string);
    let issuer = owned(opt_text(block, PLACE, "issuer")?);
    let audience = owned(opt_text(block, PLACE, "audience")?);
    let jwks_url = owned(opt_text(block, PLACE, "jwksUrl")?);
    let secret_env = owned(opt_text(block, PLACE, "secretEnv")?);
    let asymmetric = jwks_url.is_some() || (issuer.is_some() && secret_env.is_none());
    let algorithms = match text_list(block, PLACE, "algorithms")? {
        list if !list.is_empty() => list,
        _ if secret_env.is_some() => vec!["HS256".to_string()],
        _ => vec!["RS256".into(), "ES256".into(), "EdDSA".into()],
    };
    for alg in &algorithms {
        if !JWT_ALGORITHMS.contains(&alg.as_str()) {
            return Err(say(&[
                PLACE,
                ".algorithms: ",
                &quoted(alg),
                " is not accepted (use ",
                &JWT_ALGORITHMS.join(", "),
                ")",
            ]));
        }
    }
    let hs = algorithms.iter().any(|a| a == "HS256");
    match (&secret_env, jwks_url.is_some()) {
        (Some(_), true) => {
            return Err(say(&[
                PLACE,
                " uses either secretEnv (HS256) or jwksUrl (asymmetric keys), not both",
            ]))
        }
        (None, false) if !asymmetric => {
            return Err(say(&[
                PLACE,
                " needs its keys: secretEnv (HS256), jwksUrl, or issuer (OIDC discovery)",
            ]))
        }
        _ => {}
    }
    if let Some(name) = &secret_env {
        if algorithms.iter().any(|a| a != "HS256") {
            return Err(say(&[
                PLACE,
                ": with secretEnv the only algorithm is HS256 (an asymmetric alg checked with a shared secret is algorithm confusion)",
            ]));
        }
        if env(name).is_none_or(|s| s.is_empty()) {
            return Err(say(&[
                PLACE,
                ".secretEnv names ",
                &quoted(name),
                ", which is not set: the HS256 secret must not be empty",
            ]));
        }
    } else if hs {
        return Err(say(&[
            PLACE,
            ": HS256 needs secretEnv; with jwksUrl or issuer use RS256, ES256 or EdDSA",
        ]));
    }
    if let Some(url) = &jwks_url {
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(say(&[
                PLACE,
                ".jwksUrl ",
                &quoted(url),
                " is not an http(s) URL",
            ]));
        }
    }
    let leeway_seconds = match block.get("leewaySeconds") {
        None | Some(Value::Null) => DEFAULT_LEEWAY_SECONDS,
        Some(v) => match v.as_u64() {
            Some(n) if n <= MAX_LEEWAY_SECONDS => n,
            _ => {
                return Err(say(&[
                    PLACE,
                    // MAX_LEEWAY_SECONDS, spelt out (checked below at compile time).
                    ".leewaySeconds must be a whole number from 0 to 3600",
                ]));
            }
        },
    };
    Ok(JwtConfig {
        issuer,
        audience,
        jwks_url,
        algorithms,
        secret_env,
        leeway_seconds,
        required_scopes: text_list(block, PLACE, "requiredScopes")?,
    })
}

/// What a verifier says of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The caller is this principal.
    Accepted(Principal),
    /// The request carries no credential this verifier reads: ask the next.
    NotMine,
    /// Credentials missing or invalid (401), or valid but not allowed (403),
    /// with a reason for the caller (never the credential itself).
    Rejected { status: u16, reason: String },
}

/// The claims of a JWT whose signature the host has checked: its payload object.
pub type Claims = serde_json::Map<String, serde_json::Value>;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn env(name: &str) -> Option<String> {
        match name {
            "ALICE_KEY" => Some("alice-secret".into()),
            "BOB_KEY" => Some("bob-secret".into()),
            "HS_SECRET" => Some("s3cret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn reads_the_block_the_issue_gives() {
        let c = AuthConfig::from_value(
            &json!({
                "apiKeys": {"in": "query", "name": "key", "keys": {"alice": "${ALICE_KEY}", "bob": "${BOB_KEY}"}},
                "jwt": {"issuer": "https://id.example", "audience": "a2a", "jwksUrl": "https://id.example/jwks",
                        "algorithms": ["RS256", "ES256"], "leewaySeconds": 5, "requiredScopes": ["a2a.call"]}
            }),
            env,
        )
        .expect("config");
        let keys = c.api_keys.expect("api keys");
        assert_eq!(keys.location, KeyLocation::Query);
        assert_eq!(keys.name, "key");
        assert_eq!(
            keys.keys,
            vec![
                ("alice".to_string(), "alice-secret".to_string()),
                ("bob".to_string(), "bob-secret".to_string())
            ]
        );
        let jwt = c.jwt.expect("jwt");
        assert_eq!(jwt.issuer.as_deref(), Some("https://id.example"));
        assert_eq!(jwt.audience.as_deref(), Some("a2a"));
        assert_eq!(jwt.algorithms, vec!["RS256", "ES256"]);
        assert_eq!(jwt.leeway_seconds, 5);
        assert_eq!(jwt.required_scopes, vec!["a2a.call"]);
        assert!(!c.custom);
    }

    #[test]
    fn defaults_header_key_name_hs256_and_leeway() {
        let c = AuthConfig::from_value(
            &json!({"apiKeys": {"keys": {"alice": "literal-key"}}, "jwt": {"secretEnv": "HS_SECRET"}}),
            env,
        )
        .expect("config");
        let keys = c.api_keys.expect("keys");
        assert_eq!(
            (keys.location, keys.name.as_str()),
            (KeyLocation::Header, DEFAULT_KEY_NAME)
        );
        let jwt = c.jwt.expect("jwt");
        assert_eq!(jwt.algorithms, vec!["HS256"]);
        assert_eq!(jwt.leeway_seconds, DEFAULT_LEEWAY_SECONDS);
        assert_eq!(jwt.secret_env.as_deref(), Some("HS_SECRET"));
        // An issuer alone means OIDC discovery, asymmetric algorithms.
        let c = AuthConfig::from_value(&json!({"jwt": {"issuer": "https://id.example"}}), env)
            .expect("discovery");
        assert!(!c.jwt.expect("jwt").algorithms.iter().any(|a| a == "HS256"));
    }

    /// Each refused block, and a word its message must carry.
    #[test]
    fn refuses_what_would_weaken_or_silently_disable_a_verifier() {
        for (block, says) in [
            (json!("keys"), "must be an object"),
            (json!({}), "no verifier"),
            (json!({"apikeys": {}}), "unknown key"),
            (json!({"apiKeys": {"keys": {}}}), "keys must be an object"),
            (
                json!({"apiKeys": {"keys": {"alice": "${NOPE}"}}}),
                "\"alice\"",
            ),
            (json!({"apiKeys": {"keys": {"alice": "${EMPTY}"}}}), "empty"),
            (json!({"apiKeys": {"keys": {"alice": ""}}}), "empty"),
            (
                json!({"apiKeys": {"keys": {"alice": 5}}}),
                "must be a string",
            ),
            (
                json!({"apiKeys": {"keys": {"a": "k", "b": "k"}}}),
                "same key",
            ),
            (
                json!({"apiKeys": {"in": "body", "keys": {"a": "k"}}}),
                "\"body\"",
            ),
            (
                json!({"apiKeys": {"name": "X: y", "keys": {"a": "k"}}}),
                "may hold only",
            ),
            (
                json!({"apiKeys": {"keys": {"a": "k"}, "key": 1}}),
                "unknown key",
            ),
            (json!({"jwt": {}}), "needs its keys"),
            (
                json!({"jwt": {"secretEnv": "HS_SECRET", "jwksUrl": "https://x/j"}}),
                "not both",
            ),
            (
                json!({"jwt": {"secretEnv": "HS_SECRET", "algorithms": ["none"]}}),
                "\"none\"",
            ),
            (
                json!({"jwt": {"jwksUrl": "https://x/j", "algorithms": ["none"]}}),
                "\"none\"",
            ),
            (
                json!({"jwt": {"jwksUrl": "https://x/j", "algorithms": ["HS256"]}}),
                "HS256 needs secretEnv",
            ),
            (
                json!({"jwt": {"secretEnv": "HS_SECRET", "algorithms": ["RS256"]}}),
                "confusion",
            ),
            (json!({"jwt": {"secretEnv": "UNSET"}}), "not set"),
            (json!({"jwt": {"secretEnv": "EMPTY"}}), "not set"),
            (json!({"jwt": {"jwksUrl": "ftp://x/j"}}), "http(s)"),
            (
                json!({"jwt": {"issuer": "i", "leewaySeconds": -1}}),
                "leewaySeconds",
            ),
            (
                json!({"jwt": {"issuer": "i", "leewaySeconds": 86400}}),
                "leewaySeconds",
            ),
            (
                json!({"jwt": {"issuer": "i", "requiredScopes": "a b"}}),
                "requiredScopes",
            ),
            (json!({"jwt": {"issuer": 3}}), "issuer"),
        ] {
            let err = AuthConfig::from_value(&block, env).expect_err(&block.to_string());
            assert!(err.contains(says), "{block}: {err}");
            assert!(
                !err.contains("alice-secret") && !err.contains("s3cret"),
                "{err}"
            );
        }
    }

    #[test]
    fn the_owner_keeps_issuers_apart() {
        let p = |iss: Option<&str>| Principal {
            subject: "alice".into(),
            issuer: iss.map(str::to_string),
            ..Principal::default()
        };
        assert_eq!(p(None).owner(), "alice");
        assert_ne!(p(Some("https://a")).owner(), p(Some("https://b")).owner());
        assert_ne!(p(Some("https://a")).owner(), p(None).owner());
    }
}
