//! A JWT in the JWS compact form, taken apart for a host that checks its
//! signature with its own crypto (WebCrypto in the npm package, `hmac` +
//! `sha2` in the component): the header's `alg` and `kid`, the claims, the
//! signed bytes and the signature. Parsing only; no signature check here,
//! and the claims are checked by the core's policy after the host's.

use super::auth::Claims;
use serde_json::Value;

/// The most a token may weigh (16 KiB): larger ones are refused unread.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The parts of a compact JWS.
#[derive(Debug, Clone, PartialEq)]
pub struct Jws<'a> {
    /// The header's `alg` (never `none`: refused by [`parse`]).
    pub alg: String,
    /// The header's `kid`, if any.
    pub kid: Option<String>,
    /// The payload object.
    pub claims: Claims,
    /// `header.payload`, the bytes the signature covers.
    pub signing_input: &'a str,
    /// The decoded signature (for ES256, the raw `r || s` WebCrypto verifies).
    pub signature: Vec<u8>,
}

/// Base64url without padding (RFC 7515 §2), as JWS uses it; `None` for any
/// other character, padding included, or an impossible length.
pub fn base64url_decode(s: &str) -> Option<Vec<u8>> {
    fn six(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        } as u32)
    }
    let bytes = s.as_bytes();
    if bytes.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= six(c)? << (18 - 6 * i);
        }
        let b = n.to_be_bytes();
        out.extend_from_slice(&b[1..chunk.len()]);
    }
    Some(out)
}

fn json_object(part: &str, what: &str) -> Result<serde_json::Map<String, Value>, String> {
    let bytes =
        base64url_decode(part).ok_or_else(|| format!("the token's {what} is not base64url"))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(o)) => Ok(o),
        _ => Err(format!("the token's {what} is not a JSON object")),
    }
}

/// Takes a compact JWS apart: three base64url parts, a JSON header with an
/// `alg` other than `none`, a JSON object payload. The reason on failure
/// never quotes the token.
pub fn parse(token: &str) -> Result<Jws<'_>, String> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err("the token is too large".into());
    }
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("the token is not a compact JWS (header.payload.signature)".into());
    };
    let head = json_object(header, "header")?;
    let alg = match head.get("alg") {
        Some(Value::String(a)) if !a.eq_ignore_ascii_case("none") => a.clone(),
        Some(Value::String(_)) => return Err("unsigned tokens (alg none) are refused".into()),
        _ => return Err("the token's header names no alg".into()),
    };
    let kid = match head.get("kid") {
        None | Some(Value::Null) => None,
        Some(Value::String(k)) => Some(k.clone()),
        Some(_) => return Err("the token's kid is not a string".into()),
    };
    let claims = json_object(payload, "payload")?;
    let signature = base64url_decode(signature).ok_or("the token's signature is not base64url")?;
    if signature.is_empty() {
        return Err("the token has no signature".into());
    }
    Ok(Jws {
        alg,
        kid,
        claims,
        signing_input: &token[..header.len() + 1 + payload.len()],
        signature,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn b64(bytes: &[u8]) -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut s = String::new();
        for c in bytes.chunks(3) {
            let n = (c[0] as u32) << 16
                | (*c.get(1).unwrap_or(&0) as u32) << 8
                | *c.get(2).unwrap_or(&0) as u32;
            for i in 0..=c.len() {
                s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            }
        }
        s
    }

    #[test]
    fn base64url_round_trips_every_length_and_refuses_other_alphabets() {
        let data: Vec<u8> = (0..=255u8).collect();
        for n in 0..40 {
            assert_eq!(base64url_decode(&b64(&data[..n])).unwrap(), &data[..n]);
        }
        assert_eq!(base64url_decode("-_8").unwrap(), vec![0xfb, 0xff]);
        for bad in ["ab+c", "ab/c", "abc=", "a", "abcde", "a b"] {
            assert_eq!(base64url_decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn parse_takes_a_token_apart() {
        let h = b64(br#"{"alg":"ES256","kid":"k1","typ":"JWT"}"#);
        let p = b64(br#"{"sub":"alice","exp":5}"#);
        let token = format!("{h}.{p}.{}", b64(&[1, 2, 3]));
        let jws = parse(&token).unwrap();
        assert_eq!(jws.alg, "ES256");
        assert_eq!(jws.kid.as_deref(), Some("k1"));
        assert_eq!(jws.claims["sub"], "alice");
        assert_eq!(jws.signing_input, format!("{h}.{p}"));
        assert_eq!(jws.signature, vec![1, 2, 3]);
    }

    #[test]
    fn parse_refuses_bad_tokens_with_a_reason_and_never_panics() {
        let p = b64(br#"{"sub":"a"}"#);
        let sig = b64(b"s");
        let cases = [
            String::new(),
            "a.b".into(),
            "a.b.c.d".into(),
            format!("{}.{p}.{sig}", b64(br#"{"alg":"none"}"#)),
            format!("{}.{p}.{sig}", b64(br#"{"alg":"NONE"}"#)),
            format!("{}.{p}.{sig}", b64(br#"{"typ":"JWT"}"#)),
            format!("{}.{p}.{sig}", b64(br#"{"alg":"HS256","kid":7}"#)),
            format!("{}.{p}.{sig}", b64(b"[1]")),
            format!("{}.{}.{sig}", b64(br#"{"alg":"HS256"}"#), b64(b"\"str\"")),
            format!("{}.{p}.", b64(br#"{"alg":"HS256"}"#)),
            format!("{}.{p}.{sig}", "%%%"),
            "x".repeat(MAX_TOKEN_BYTES + 1),
        ];
        for token in &cases {
            let why = parse(token).unwrap_err();
            assert!(!why.is_empty());
        }
        // Every prefix of a good token, every byte flipped: an answer, no panic.
        let good = format!("{}.{p}.{sig}", b64(br#"{"alg":"HS256"}"#));
        for i in 0..good.len() {
            let _ = parse(&good[..i]);
            let mut b = good.clone().into_bytes();
            b[i] ^= 0x55;
            if let Ok(s) = String::from_utf8(b) {
                let _ = parse(&s);
            }
        }
    }
}
