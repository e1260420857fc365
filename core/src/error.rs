//! Errors, typed by where they come from.

use std::fmt;

/// A request that never got an HTTP answer (DNS, connect, TLS, reset, a
/// CORS refusal in browsers). Hosts build it from their client's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportError(pub String);

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TransportError {}

/// Why an operation failed. Each variant names the source, so a caller can
/// tell "the network is down" from "the peer is broken" from "I misused the API".
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// No HTTP answer at all. Check the URL and that the peer is up (and, in a
    /// browser, that it sends CORS headers).
    Transport(String),
    /// The peer answered with a non-2xx HTTP status.
    Status {
        status: u16,
        url: String,
        body: String,
    },
    /// The peer answered, but not with what the protocol says (not JSON, not
    /// an Agent Card, a reply with neither result nor error). The peer is broken
    /// or the URL points at something else.
    Malformed(String),
    /// The peer returned a JSON-RPC error object.
    Rpc { code: i64, message: String },
    /// The caller passed something unusable (bad arguments, bad config).
    Misuse(String),
}

impl Error {
    /// A short stable name for the variant, for JS `error.kind` and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Transport(_) => "transport",
            Error::Status { .. } => "status",
            Error::Malformed(_) => "malformed",
            Error::Rpc { .. } => "rpc",
            Error::Misuse(_) => "misuse",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Transport(m) | Error::Malformed(m) | Error::Misuse(m) => f.write_str(m),
            Error::Status { status, url, body } if body.is_empty() => {
                write!(f, "HTTP {status} from {url}")
            }
            Error::Status { status, url, body } => write!(f, "HTTP {status} from {url}: {body}"),
            Error::Rpc { code, message } => write!(f, "JSON-RPC error {code}: {message}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<TransportError> for Error {
    fn from(e: TransportError) -> Self {
        Error::Transport(e.0)
    }
}
