//! The HTTP front of the server: the card it serves, and routing a request
//! to the card, the JSON-RPC endpoint, the REST binding or a plain answer.

use super::*;

/// The card a server serves.
// Made once per server: the size of its variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum CardSpec {
    /// This card, as is (see [`build_agent_card`]).
    Fixed(Value),
    /// [`build_agent_card`] for each card request, advertising the request's
    /// own origin (`<origin>/`): for hosts that learn their URL only from
    /// requests (edge workers, wasi:http). The origin is the request URL's,
    /// else `http://` and its `Host` header.
    RequestOrigin {
        config: A2aConfig,
        skills: Vec<crate::skills::Skill>,
    },
}

impl From<Value> for CardSpec {
    fn from(card: Value) -> Self {
        CardSpec::Fixed(card)
    }
}

/// The card ready to serve.
pub(super) enum Card {
    /// Its bytes and their entity tag, computed once per version: 1.0, 0.3.
    Fixed([(Vec<u8>, String); 2]),
    RequestOrigin(Box<A2aConfig>, Vec<crate::skills::Skill>),
}

/// `card` in `shape` (see [`card_for`]), as bytes with their entity tag.
pub(super) fn card_bytes(card: &Value, shape: Shape) -> (Vec<u8>, String) {
    let body = crate::wire::json::text(&card_for(card, shape)).into_bytes();
    let etag = entity_tag(&body);
    (body, etag)
}

/// The version a card request asks for: its `A2A-Version` (header or
/// query), else 1.0, the card the spec's well-known URI serves (§14.3,
/// and §6.9's example fetch, which sends no version), except at the
/// pre-1.0 path `/.well-known/agent.json`, which only older clients ask.
pub(super) fn card_shape(req: &HttpRequest, path: &str) -> Shape {
    match rpc::requested_version(req).map(str::trim) {
        Some(v) if v.starts_with("0.") => Shape::V03,
        Some(v) if !v.is_empty() => Shape::V10,
        _ if path == LEGACY_CARD_PATH => Shape::V03,
        _ => Shape::V10,
    }
}

impl Card {
    pub(super) fn fixed(card: &Value) -> Card {
        Card::Fixed([card_bytes(card, Shape::V10), card_bytes(card, Shape::V03)])
    }

    /// The card in `shape`, and its entity tag.
    pub(super) fn body(&self, req: &HttpRequest, shape: Shape) -> (Vec<u8>, String) {
        match self {
            Card::Fixed([v10, v03]) => match shape {
                Shape::V10 => v10.clone(),
                Shape::V03 => v03.clone(),
            },
            Card::RequestOrigin(config, skills) => {
                let url = format!("{}/", request_origin(req));
                card_bytes(&build_agent_card(config, skills, &url), shape)
            }
        }
    }

    /// `200` with the card in `shape`, or `304` when the request's
    /// `If-None-Match` names its entity tag; both say how long to cache
    /// it, and that it varies with the version asked.
    pub(super) fn respond(
        &self,
        req: &HttpRequest,
        shape: Shape,
        cache_control: &str,
    ) -> HttpResponse {
        let (body, etag) = self.body(req, shape);
        let matches = req.header("If-None-Match").is_some_and(|list| {
            list.split(',')
                .map(|t| {
                    let mut t = t.trim();
                    while let Some(rest) = t.strip_prefix("W/") {
                        t = rest;
                    }
                    t
                })
                .any(|t| t == "*" || t == etag)
        });
        let mut resp = if matches {
            HttpResponse {
                status: 304,
                headers: Vec::new(),
                body: Vec::new(),
            }
        } else {
            HttpResponse::json(200, body)
        };
        resp.headers.push(("ETag".into(), etag));
        resp.headers
            .push(("Cache-Control".into(), cache_control.into()));
        resp.headers.push(("Vary".into(), "A2A-Version".into()));
        resp
    }
}

/// A strong entity tag for `body`: its 64-bit hash, quoted.
pub(super) fn entity_tag(body: &[u8]) -> String {
    // FNV-1a, not std's DefaultHasher: SipHash would be code the `.wasm`
    // carries for this alone (and its output may change between releases).
    let hash = crate::wire::fnv1a(crate::wire::FNV_OFFSET, body);
    format!("\"{hash:016x}\"")
}

/// The origin a request was sent to: its URL's, else its `Host` header's.
pub(super) fn request_origin(req: &HttpRequest) -> String {
    if let Some(origin) = crate::wire::url::origin(&req.url) {
        return origin.to_string();
    }
    let host = req
        .header("Host")
        .map(str::trim)
        .filter(|h| !h.is_empty() && !h.contains(['/', ' ', '"', '\\']))
        .unwrap_or("localhost");
    format!("http://{host}")
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// The path of a request below the HTTP+JSON mount, if it is under it
    /// (preflights excepted).
    pub(super) fn rest_path(&self, req: &HttpRequest) -> Option<String> {
        let mount = self.rest.as_ref()?;
        if req.method == "OPTIONS" {
            return None;
        }
        let under = path_of(&req.url).strip_prefix(mount.path.as_str())?;
        (under.len() > 1 && under.starts_with('/')).then(|| under.to_string())
    }

    pub(super) fn route_plain(&self, req: &HttpRequest, card: &Card) -> HttpResponse {
        let path = path_of(&req.url);
        match (req.method.as_str(), path) {
            ("OPTIONS", _) if self.cors_origin.is_some() => HttpResponse {
                status: 204,
                headers: [
                    (
                        "Access-Control-Allow-Methods".into(),
                        "GET, POST, DELETE, OPTIONS".into(),
                    ),
                    (
                        "Access-Control-Allow-Headers".into(),
                        req.header("Access-Control-Request-Headers")
                            .unwrap_or("Content-Type, A2A-Version, Authorization")
                            .into(),
                    ),
                    ("Access-Control-Max-Age".into(), "86400".into()),
                ]
                .into_iter()
                .chain(self.private_network_preflight(req))
                .collect(),
                body: Vec::new(),
            },
            ("GET" | "HEAD", CARD_PATH | LEGACY_CARD_PATH) => {
                card.respond(req, card_shape(req, path), &self.card_cache_control)
            }
            (_, "/" | CARD_PATH | LEGACY_CARD_PATH) => {
                let mut r = plain(405, "method not allowed");
                r.headers.push((
                    "Allow".into(),
                    if path == "/" { "POST" } else { "GET" }.into(),
                ));
                r
            }
            _ => plain(404, "not found"),
        }
    }
}

/// The path of a request URL (absolute URLs accepted), without query or fragment.
pub(super) fn path_of(url: &str) -> &str {
    let path = match crate::wire::url::origin(url) {
        Some(o) => url.get(o.len()..).unwrap_or(url),
        None => url,
    };
    path.split(['?', '#'])
        .next()
        .filter(|p| !p.is_empty())
        .unwrap_or("/")
}

pub(super) fn plain(status: u16, text: &str) -> HttpResponse {
    HttpResponse {
        status,
        headers: vec![("Content-Type".into(), "text/plain; charset=utf-8".into())],
        body: format!("{text}\n").into_bytes(),
    }
}
