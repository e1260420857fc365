//! Who is calling `createA2AHandler`: the host half of the core's identity
//! step. Conversions only; the policy (which verifier, 401 or 403, the
//! claims) is the core's.
//!
//! - `authenticate(request)`: the user's JS verifier. A principal object
//!   accepts, a `Response` rejects with that very response, `null` /
//!   `undefined` means "no credential this function reads" (the core asks
//!   its other verifiers and answers 401 when none accepts).
//! - JWT signatures: WebCrypto (`crypto.subtle.importKey` + `verify`), never
//!   a crypto crate in the `.wasm`.

use crate::convert::{error_text, get, is_absent, pairs_to_js, set};
use js_sys::{Array, Function, Object, Promise, Uint8Array};
use std::cell::RefCell;
use std::rc::Rc;
use toolnexus_core::server::auth::{AuthConfig, Principal, Verdict};
use toolnexus_core::HttpRequest;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = Request)]
    type JsRequest;
    #[wasm_bindgen(constructor, js_class = "Request", catch)]
    fn new(url: &str, init: &JsValue) -> Result<JsRequest, JsValue>;

    #[wasm_bindgen(js_name = Response)]
    pub type AnyResponse;
    #[wasm_bindgen(method, getter)]
    pub fn status(this: &AnyResponse) -> u16;
}

/// The `Response` a JS verifier rejected the request being served with:
/// one slot per request, filled by [`js_authenticate`], read by the handler,
/// which answers with it instead of the core's generic refusal.
pub type Refusal = Rc<RefCell<Option<JsValue>>>;

thread_local! {
    /// The slot of the request whose future is being polled right now.
    pub static CURRENT_REFUSAL: RefCell<Option<Refusal>> = const { RefCell::new(None) };
}

/// The request as a fresh `Request` (the original's body has been read).
fn to_js_request(req: &HttpRequest) -> Result<JsRequest, JsValue> {
    let init: JsValue = Object::new().into();
    set(&init, "method", &req.method.as_str().into());
    set(&init, "headers", &pairs_to_js(&req.headers));
    if !req.body.is_empty() && req.method != "GET" && req.method != "HEAD" {
        set(&init, "body", &Uint8Array::from(&req.body[..]).into());
    }
    JsRequest::new(&req.url, &init)
}

/// A principal object `{subject, issuer?, tenant?, scopes?}`, or why not.
fn principal(v: &JsValue) -> Result<Principal, String> {
    let text = |key: &str| -> Result<Option<String>, String> {
        let v = get(v, key);
        if is_absent(&v) {
            return Ok(None);
        }
        v.as_string()
            .map(Some)
            .ok_or_else(|| format!("principal.{key} must be a string"))
    };
    let subject = text("subject")?
        .filter(|s| !s.is_empty())
        .ok_or("a principal needs a non-empty subject")?;
    let scopes = get(v, "scopes");
    let scopes = if is_absent(&scopes) {
        Vec::new()
    } else if Array::is_array(&scopes) {
        // A plain loop, not an iterator chain (see ARCHITECTURE.md).
        let mut list = Vec::new();
        for s in Array::from(&scopes).iter() {
            list.push(s.as_string().ok_or("principal.scopes must be strings")?);
        }
        list
    } else {
        return Err("principal.scopes must be an array of strings".into());
    };
    Ok(Principal {
        subject,
        issuer: text("issuer")?,
        tenant: text("tenant")?,
        scopes,
    })
}

fn report(problem: &str) {
    crate::convert::console_error(&format!("toolnexus: {problem}"));
}

/// Runs the user's `authenticate(request)` and reads its answer as a
/// [`Verdict`]. A function that throws, or answers something else, is
/// reported on the console and the request is refused (401), never let
/// through.
pub async fn js_authenticate(
    function: Function,
    req: HttpRequest,
    refusal: Option<Refusal>,
) -> Verdict {
    let failed = |why: String| {
        report(&format!("the authenticate function {why}"));
        Verdict::Rejected {
            status: 401,
            reason: "the server could not authenticate the request".into(),
        }
    };
    let request = match to_js_request(&req) {
        Ok(r) => r,
        Err(e) => return failed(format!("got no Request: {}", error_text(&e))),
    };
    let answer = match function.call1(&JsValue::UNDEFINED, &request) {
        Ok(v) => JsFuture::from(Promise::resolve(&v)).await,
        Err(e) => Err(e),
    };
    let answer = match answer {
        Ok(v) => v,
        Err(e) => return failed(format!("threw: {}", error_text(&e))),
    };
    if is_absent(&answer) {
        return Verdict::NotMine;
    }
    if answer.is_instance_of::<AnyResponse>() {
        let status = answer.unchecked_ref::<AnyResponse>().status();
        if let Some(slot) = refusal {
            *slot.borrow_mut() = Some(answer);
        }
        return Verdict::Rejected {
            status,
            reason: "refused by the authenticate function".into(),
        };
    }
    if !answer.is_object() {
        return failed("must return a principal object, a Response, or null".into());
    }
    match principal(&answer) {
        Ok(p) => Verdict::Accepted(p),
        Err(why) => failed(format!("returned a bad principal: {why}")),
    }
}

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = Headers)]
    type JsHeaders;
    #[wasm_bindgen(constructor, js_class = "Headers", catch)]
    fn new(init: &JsValue) -> Result<JsHeaders, JsValue>;
    #[wasm_bindgen(method)]
    fn has(this: &JsHeaders, name: &str) -> bool;
    #[wasm_bindgen(method)]
    fn set(this: &JsHeaders, name: &str, value: &str);

    #[wasm_bindgen(js_name = Response)]
    type NewResponse;
    #[wasm_bindgen(constructor, js_class = "Response", catch)]
    fn new(body: &JsValue, init: &JsValue) -> Result<NewResponse, JsValue>;
}

/// The user's refusing `Response`, with the `Access-Control-*` headers the
/// core's own answer had (and the user's did not), so a page can read it.
pub fn with_cors(theirs: JsValue, core_headers: &[(String, String)]) -> Result<JsValue, JsValue> {
    let cors: Vec<_> = core_headers
        .iter()
        // `get`, not `[..]`: no `str` slicing panic (and its `char` Debug) in the `.wasm`.
        .filter(|(k, _)| {
            k.len() > 15
                && k.get(..15)
                    .is_some_and(|p| p.eq_ignore_ascii_case("access-control-"))
        })
        .collect();
    if cors.is_empty() {
        return Ok(theirs);
    }
    let headers = JsHeaders::new(&get(&theirs, "headers"))?;
    for (k, v) in cors {
        if !headers.has(k) {
            headers.set(k, v);
        }
    }
    let init: JsValue = Object::new().into();
    set(&init, "status", &get(&theirs, "status"));
    set(&init, "statusText", &get(&theirs, "statusText"));
    set(&init, "headers", &headers);
    NewResponse::new(&get(&theirs, "body"), &init).map(Into::into)
}

/// The handler's verifiers: the `auth` block (the native `a2a.auth`
/// shape, read by the core; `${NAME}` and `secretEnv` looked up in the
/// `env` option, else `process.env`) and whether an `authenticate`
/// function is given. `None`: no verifier, every caller is anonymous.
pub fn auth_config(
    options: &JsValue,
    custom: bool,
) -> Result<(Option<AuthConfig>, Option<Rc<JwtVerifier>>), JsValue> {
    let block = get(options, "auth");
    let env = get(options, "env");
    let env = (!is_absent(&env)).then_some(env);
    if is_absent(&block) {
        let config = custom.then(|| AuthConfig {
            custom: true,
            ..Default::default()
        });
        return Ok((config, None));
    }
    let value = crate::convert::to_json(&block, "createA2AHandler options.auth")?;
    let mut config = AuthConfig::from_value(&value, |name| env_lookup(&env, name))
        .map_err(|e| crate::convert::misuse(format!("createA2AHandler options.auth: {e}")))?;
    config.custom = custom;
    let jwt = match &config.jwt {
        Some(jwt) => Some(Rc::new(JwtVerifier::new(jwt.clone(), env).map_err(
            |e| crate::convert::misuse(format!("createA2AHandler options.auth.jwt: {e}")),
        )?)),
        None => None,
    };
    Ok((Some(config), jwt))
}

// ---------------------------------------------------------------------------
// JWT signatures through WebCrypto

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = ["crypto", "subtle"], js_name = importKey, catch)]
    fn import_key(
        format: &str,
        key: &JsValue,
        algorithm: &JsValue,
        extractable: bool,
        usages: &Array,
    ) -> Result<Promise, JsValue>;
    #[wasm_bindgen(js_namespace = ["crypto", "subtle"], catch)]
    fn verify(
        algorithm: &JsValue,
        key: &JsValue,
        signature: &Uint8Array,
        data: &Uint8Array,
    ) -> Result<Promise, JsValue>;
}

/// WebCrypto's names for a JWS `alg`: (import parameters, verify parameters).
fn webcrypto_params(alg: &str) -> Option<(JsValue, JsValue)> {
    let obj = |pairs: &[(&str, &str)]| -> JsValue {
        let o: JsValue = Object::new().into();
        for (k, v) in pairs {
            set(&o, k, &(*v).into());
        }
        o
    };
    Some(match alg {
        "HS256" => {
            let p = obj(&[("name", "HMAC"), ("hash", "SHA-256")]);
            (p.clone(), p)
        }
        "RS256" => {
            let p = obj(&[("name", "RSASSA-PKCS1-v1_5"), ("hash", "SHA-256")]);
            (p.clone(), p)
        }
        // A JWS ES256 signature is the raw r || s, which is what WebCrypto verifies.
        "ES256" => (
            obj(&[("name", "ECDSA"), ("namedCurve", "P-256")]),
            obj(&[("name", "ECDSA"), ("hash", "SHA-256")]),
        ),
        "EdDSA" => {
            let p = obj(&[("name", "Ed25519")]);
            (p.clone(), p)
        }
        _ => return None,
    })
}

/// Whether `signature` signs `data` with `key` (a secret's bytes for
/// HS256, else a JWK object) under `alg`. Errors: the runtime lacks the
/// algorithm (Ed25519 in older ones), or the key does not import.
async fn webcrypto_verify(
    alg: &str,
    key: &JsValue,
    signature: &[u8],
    data: &[u8],
) -> Result<bool, String> {
    let (import, params) =
        webcrypto_params(alg).ok_or_else(|| format!("alg {alg} is not supported"))?;
    let format = if alg == "HS256" { "raw" } else { "jwk" };
    let usages = Array::of1(&"verify".into());
    let fail = |e: JsValue| format!("WebCrypto cannot check {alg}: {}", error_text(&e));
    let key = JsFuture::from(import_key(format, key, &import, false, &usages).map_err(fail)?)
        .await
        .map_err(fail)?;
    let ok = JsFuture::from(
        verify(
            &params,
            &key,
            &Uint8Array::from(signature),
            &Uint8Array::from(data),
        )
        .map_err(fail)?,
    )
    .await
    .map_err(fail)?;
    Ok(ok.as_bool() == Some(true))
}

/// A JWK with only the members WebCrypto needs to import a public key
/// (others, such as `alg`, `use` or `key_ops`, can make an import fail
/// for no reason that matters here: `jwks::key_fits` chose the key).
fn public_jwk(jwk: &serde_json::Value) -> JsValue {
    let o: JsValue = Object::new().into();
    for k in ["kty", "crv", "n", "e", "x", "y"] {
        if let Some(v) = jwk.get(k).and_then(|v| v.as_str()) {
            set(&o, k, &v.into());
        }
    }
    o
}

/// One `jwt` verifier of a handler: its policy, where its HS256 secret is,
/// and its key cache (the core's machine, driven here with `fetch`).
pub struct JwtVerifier {
    config: toolnexus_core::server::auth::JwtConfig,
    env: Option<JsValue>,
    keys: Option<RefCell<toolnexus_core::server::jwks::JwksCache>>,
}

/// Looks `name` up in the handler's `env` option, else `process.env`.
pub fn env_lookup(env: &Option<JsValue>, name: &str) -> Option<String> {
    let from = match env {
        Some(env) => env.clone(),
        None => get(&get(&js_sys::global(), "process"), "env"),
    };
    get(&from, name).as_string()
}

impl JwtVerifier {
    pub fn new(
        config: toolnexus_core::server::auth::JwtConfig,
        env: Option<JsValue>,
    ) -> Result<Self, String> {
        let keys = match toolnexus_core::server::jwks::KeySource::of(&config) {
            None => None,
            Some(source) => Some(RefCell::new(toolnexus_core::server::jwks::JwksCache::new(
                source?,
            ))),
        };
        Ok(JwtVerifier { config, env, keys })
    }

    /// The token's claims when its signature is good under an accepted
    /// `alg`; the core checks the claims.
    pub async fn verify(
        self: Rc<Self>,
        token: String,
    ) -> Result<toolnexus_core::server::auth::Claims, String> {
        use toolnexus_core::server::jwks::{Fetched, Lookup};
        let jws = toolnexus_core::server::jws::parse(&token)?;
        if !self.config.algorithms.contains(&jws.alg) {
            return Err(format!("alg {} is not accepted", jws.alg));
        }
        let data = jws.signing_input.as_bytes();
        if jws.alg == "HS256" {
            let name = self.config.secret_env.as_deref().unwrap_or_default();
            let secret = env_lookup(&self.env, name)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| format!("the HS256 secret ({name}) is not set"))?;
            let secret: JsValue = Uint8Array::from(secret.as_bytes()).into();
            return match webcrypto_verify("HS256", &secret, &jws.signature, data).await? {
                true => Ok(jws.claims),
                false => Err("the token's signature does not verify".into()),
            };
        }
        let cache = self
            .keys
            .as_ref()
            .ok_or("no keys are configured for asymmetric tokens")?;
        // Bounded: fetches are rate-limited by the machine; waits for another
        // request's fetch are 20 ms each, about 5 s in all.
        for _ in 0..256 {
            let now = crate::transport::now_ms();
            let lookup = cache.borrow_mut().lookup(now, jws.kid.as_deref(), &jws.alg);
            match lookup {
                Lookup::Keys(keys) => {
                    for jwk in &keys {
                        if webcrypto_verify(&jws.alg, &public_jwk(jwk), &jws.signature, data)
                            .await?
                        {
                            return Ok(jws.claims);
                        }
                    }
                    return Err("the token's signature does not verify".into());
                }
                Lookup::Refuse(why) => return Err(why),
                Lookup::Wait => {
                    crate::transport::timer_until(now + 20).await;
                }
                Lookup::Fetch(fetch) => {
                    let answer = crate::transport::send(toolnexus_core::HttpRequest {
                        method: "GET".into(),
                        url: fetch.url.clone(),
                        headers: vec![("accept".into(), "application/json".into())],
                        body: Vec::new(),
                    })
                    .await;
                    let now = crate::transport::now_ms();
                    let mut cache = cache.borrow_mut();
                    match &answer {
                        Ok(resp) => {
                            let cache_control = resp
                                .headers
                                .iter()
                                .find(|(k, _)| k.eq_ignore_ascii_case("cache-control"))
                                .map(|(_, v)| v.as_str());
                            cache.fetched(
                                now,
                                &fetch,
                                Ok(Fetched {
                                    status: resp.status,
                                    cache_control,
                                    body: &resp.body,
                                }),
                            )
                        }
                        Err(e) => cache.fetched(now, &fetch, Err(e.to_string())),
                    }
                }
            }
        }
        Err("the signing keys could not be had".into())
    }
}
