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
//! SKELETON: the types and hooks below are the interface the hosts code
//! against; the policy is being implemented behind them.

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
