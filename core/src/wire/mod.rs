//! What crosses the wire: plain HTTP requests and responses, JSON-RPC and the
//! three dialects (toolnexus, A2A 0.3, A2A 1.0), Server-Sent Events, URLs.

pub(crate) mod http;
pub(crate) mod json;
pub(crate) mod rest;
pub(crate) mod rpc;
pub(crate) mod sse;
pub(crate) mod trace;
pub(crate) mod url;

/// The offset basis of 64-bit FNV-1a: the start of [`fnv1a`] for the plain hash.
pub(crate) const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// 64-bit FNV-1a of `bytes`: a hash that stays the same across builds and
/// platforms (unlike std's), for names that outlive a process (the CLI's
/// card cache files). Not a cryptographic hash.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    fnv1a(FNV_OFFSET, bytes)
}

/// 64-bit FNV-1a of `bytes`, starting from `basis` ([`FNV_OFFSET`], or it
/// mixed with a seed). Not a cryptographic hash: ids, jitter, entity tags.
pub(crate) fn fnv1a(basis: u64, bytes: &[u8]) -> u64 {
    let mut h = basis;
    for b in bytes {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}
