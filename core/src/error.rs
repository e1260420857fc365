//! Errors, typed by where they come from, each keeping the error that caused
//! it (`std::error::Error::source`).
//!
//! The npm build (`wasm32-unknown-unknown`) keeps no causes: its errors reach
//! JavaScript as `kind` and `message` only, and the bytes of every cause's
//! `Debug`/`Display`/`Error` code would ship to browsers for nothing. There
//! `source()` is `None` and the message alone says what happened, as it does
//! everywhere.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;

/// The error underneath another (an I/O, HTTP client, JSON or YAML error),
/// kept so callers can walk [`source`](StdError::source) and downcast it.
/// Shared, so the errors that hold one stay `Clone`.
pub type Cause = Arc<dyn StdError + Send + Sync + 'static>;

/// Defines an error type that is a message and, when there is one, the error
/// that caused it. The message already says what the cause said (it is what
/// [`Display`](fmt::Display) shows); [`source`](StdError::source) hands out
/// the cause itself. Equality compares the messages: causes seldom
/// implement `PartialEq`.
macro_rules! message_error {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone)]
        pub struct $name {
            message: String,
            /// A compare-and-swap refused (the store's `conflict`).
            #[allow(dead_code)]
            conflict: bool,
            #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
            source: Option<$crate::error::Cause>,
        }

        impl $name {
            /// An error with no underlying one.
            pub fn new(message: impl Into<String>) -> Self {
                $name {
                    message: message.into(),
                    conflict: false,
                    #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
                    source: None,
                }
            }

            /// An error caused by `source` (an error, or one already boxed).
            /// The npm build drops the cause (see the module docs).
            pub fn with_source(
                message: impl Into<String>,
                source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
            ) -> Self {
                #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
                {
                    let _ = source;
                    $name::new(message)
                }
                #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
                {
                    $name {
                        message: message.into(),
                        conflict: false,
                        source: Some(std::sync::Arc::from(source.into())),
                    }
                }
            }

            /// The message, as `Display` shows it.
            pub fn message(&self) -> &str {
                &self.message
            }

            /// The same error with its message rewritten by `f`; the cause is
            /// kept unless `keep_source` refuses it (its text holds a secret, say).
            pub fn map(
                self,
                f: impl FnOnce(String) -> String,
                keep_source: impl FnOnce(&$crate::error::Cause) -> bool,
            ) -> Self {
                #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
                {
                    let _ = keep_source;
                    $name {
                        message: f(self.message),
                        conflict: self.conflict,
                    }
                }
                #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
                {
                    $name {
                        message: f(self.message),
                        conflict: self.conflict,
                        source: self.source.filter(keep_source),
                    }
                }
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let mut d = f.debug_tuple(stringify!($name));
                d.field(&self.message);
                #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
                if let Some(source) = &self.source {
                    d.field(source);
                }
                d.finish()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.message)
            }
        }

        impl std::error::Error for $name {
            #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.source
                    .as_deref()
                    .map(|e| e as &(dyn std::error::Error + 'static))
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.message == other.message
            }
        }

        impl Eq for $name {}

        impl From<String> for $name {
            fn from(message: String) -> Self {
                $name::new(message)
            }
        }

        impl From<&str> for $name {
            fn from(message: &str) -> Self {
                $name::new(message)
            }
        }
    };
}
// For the server's `StoreError` and the skills' `SkillError`.
#[cfg_attr(not(feature = "server"), allow(unused_imports))]
pub(crate) use message_error;

message_error! {
    /// What was wrong with a peer's answer, and the error that found it (the
    /// JSON reader's, the SSE decoder's) when there is one.
    Reason
}

message_error! {
    /// A request that never got an HTTP answer (DNS, connect, TLS, reset, a
    /// CORS refusal in browsers). Hosts build it from their client's error,
    /// which [`source`](StdError::source) returns.
    TransportError
}

/// Why an operation failed. Each variant names the source, so a caller can
/// tell "the network is down" from "the peer is broken" from "I misused the API".
/// [`source`](StdError::source) returns the error underneath, when there is one
/// (the HTTP client's, the JSON reader's).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// No HTTP answer at all. Check the URL and that the peer is up (and, in a
    /// browser, that it sends CORS headers).
    Transport(TransportError),
    /// The peer answered with a non-2xx HTTP status.
    Status {
        status: u16,
        url: String,
        body: String,
    },
    /// The peer answered, but not with what the protocol says (not JSON, not
    /// an Agent Card, a reply with neither result nor error). The peer is broken
    /// or the URL points at something else.
    Malformed(Reason),
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

    /// [`Error::Transport`] with `message` and no cause.
    pub fn transport(message: impl Into<String>) -> Self {
        Error::Transport(TransportError::new(message))
    }

    /// [`Error::Malformed`] with `message` and no cause.
    pub fn malformed(message: impl Into<String>) -> Self {
        Error::Malformed(Reason::new(message))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Transport(e) => f.write_str(e.message()),
            Error::Malformed(r) => f.write_str(r.message()),
            Error::Misuse(m) => f.write_str(m),
            Error::Status { status, url, body } if body.is_empty() => {
                write!(f, "HTTP {status} from {url}")
            }
            Error::Status { status, url, body } => write!(f, "HTTP {status} from {url}: {body}"),
            Error::Rpc { code, message } => write!(f, "JSON-RPC error {code}: {message}"),
        }
    }
}

impl StdError for Error {
    /// The reason's cause: `Transport` and `Malformed` show their reason's
    /// message as their own, so the chain goes on from its cause.
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            Error::Transport(e) => e.source(),
            Error::Malformed(r) => r.source(),
            _ => None,
        }
    }
}

impl From<TransportError> for Error {
    fn from(e: TransportError) -> Self {
        Error::Transport(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[derive(Debug)]
    struct Refused;

    impl fmt::Display for Refused {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("connection refused")
        }
    }

    impl StdError for Refused {}

    /// Whether this build keeps causes (the npm build does not).
    const KEEPS_CAUSES: bool = !cfg!(all(target_arch = "wasm32", target_os = "unknown"));

    #[test]
    fn a_transport_error_keeps_its_cause_and_its_text() {
        let e: Error =
            TransportError::with_source("request to http://x/ failed: connection refused", Refused)
                .into();
        assert_eq!(
            e.to_string(),
            "request to http://x/ failed: connection refused"
        );
        if KEEPS_CAUSES {
            let cause = e.source().expect("the cause is kept");
            assert!(cause.downcast_ref::<Refused>().is_some());
        } else {
            assert!(e.source().is_none());
        }
        assert_eq!(
            e,
            Error::transport("request to http://x/ failed: connection refused")
        );
        assert!(Error::transport("timed out").source().is_none());
    }

    #[test]
    fn a_malformed_reply_keeps_the_json_error() {
        let json = serde_json::from_slice::<serde_json::Value>(b"{").expect_err("not JSON");
        let e = Error::Malformed(Reason::with_source(format!("not JSON: {json}"), json));
        if KEEPS_CAUSES {
            let cause = e.source().expect("the cause is kept");
            assert!(cause.downcast_ref::<serde_json::Error>().is_some());
        }
        assert!(e.to_string().starts_with("not JSON: EOF"));
    }
}
