//! The little URL handling the protocol needs: an origin, and resolving a
//! card's (possibly relative) endpoint against the card URL. Kept tiny on
//! purpose: a full URL crate costs tens of KB of wasm for IDNA tables.

use crate::wire::http::find_str;

/// `scheme://authority` of an absolute URL, or `None` when it has no scheme.
pub fn origin(url: &str) -> Option<&str> {
    // `find_str` and `get`, not `find("://")` and `[..]`: see `find_str`.
    let scheme_end = find_str(url, "://")?;
    if scheme_end == 0
        || !url.as_bytes()[..scheme_end]
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || b"+-.".contains(&c))
    {
        return None;
    }
    let rest = url.get(scheme_end + 3..)?;
    let auth_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if auth_len == 0 {
        return None;
    }
    url.get(..scheme_end + 3 + auth_len)
}

/// Resolves `reference` (absolute, scheme-relative, absolute-path or relative
/// path) against the absolute URL `base`.
pub fn resolve(base: &str, reference: &str) -> String {
    if origin(reference).is_some() {
        return reference.to_string();
    }
    if let Some(rest) = reference.strip_prefix("//") {
        let scheme = find_str(base, "://").and_then(|i| base.get(..i));
        let scheme = scheme.unwrap_or("http");
        return format!("{scheme}://{rest}");
    }
    let Some(base_origin) = origin(base) else {
        return reference.to_string();
    };
    if reference.starts_with('/') {
        return format!("{base_origin}{reference}");
    }
    // A relative path: replace the last segment of the base path.
    let path = base.get(base_origin.len()..).unwrap_or_default();
    let path = path.get(..path.find(['?', '#']).unwrap_or(path.len()));
    let path = path.unwrap_or_default();
    let dir = path.get(..path.rfind('/').map_or(0, |i| i + 1));
    let dir = dir.unwrap_or_default();
    let dir = if dir.is_empty() { "/" } else { dir };
    format!("{base_origin}{dir}{reference}")
}

/// `url` as it may be shown: without userinfo (`user:password@`), and with
/// the query and fragment replaced by `?…`, where secrets (tokens, keys) hide.
pub fn redact(url: &str) -> String {
    // Byte scans, not `format!` or reverse char searches: this is in every
    // client build.
    // (`get` and `find_str`, not `[..]` and `find("://")`: see `find_str`.)
    let end = url.find(['?', '#']).unwrap_or(url.len());
    let mut rest = url.get(..end).unwrap_or(url);
    let mut out = String::with_capacity(end + 4);
    if let Some(i) = find_str(rest, "://") {
        out.push_str(rest.get(..i + 3).unwrap_or_default());
        rest = rest.get(i + 3..).unwrap_or_default();
        let authority = rest.find('/').unwrap_or(rest.len());
        if let Some(at) = rest.as_bytes()[..authority]
            .iter()
            .rposition(|&b| b == b'@')
        {
            rest = rest.get(at + 1..).unwrap_or_default();
        }
    }
    out.push_str(rest);
    if end < url.len() {
        out.push_str("?…");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn origin_is_scheme_and_authority() {
        assert_eq!(
            origin("http://127.0.0.1:8080/.well-known/agent-card.json"),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(origin("https://a.example?x=1"), Some("https://a.example"));
        assert_eq!(origin("/relative"), None);
        assert_eq!(origin("http:///nohost"), None);
    }

    #[test]
    fn resolves_every_reference_form() {
        let card = "http://h:1/.well-known/agent-card.json";
        assert_eq!(resolve(card, "http://x/rpc"), "http://x/rpc");
        assert_eq!(resolve(card, "//y:2/a"), "http://y:2/a");
        assert_eq!(resolve(card, "/a2a/v1"), "http://h:1/a2a/v1");
        assert_eq!(resolve(card, "rpc"), "http://h:1/.well-known/rpc");
        assert_eq!(resolve("http://h:1", "rpc"), "http://h:1/rpc");
    }

    #[test]
    fn redact_hides_userinfo_and_the_query() {
        assert_eq!(
            redact("https://user:pw@h.example:8443/a/card.json?token=s3cret#x"),
            "https://h.example:8443/a/card.json?…"
        );
        assert_eq!(redact("http://h/p"), "http://h/p");
        assert_eq!(redact("http://a@b@h/"), "http://h/");
        assert_eq!(redact("/rel?key=1"), "/rel?…");
        assert_eq!(redact("http://h?k=1"), "http://h?…");
    }
}
