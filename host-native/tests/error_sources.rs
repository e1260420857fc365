//! Errors keep what caused them: a refused connection, a card that is not
//! JSON, a store folder that cannot be made, a UI folder or a port that
//! cannot be served are typed errors whose `source()` chain reaches the
//! io/JSON error underneath, with the same one-line text as before.

mod common;

use common::{Stub, CARD_PATH};
use std::error::Error as _;
use std::sync::Arc;
use toolnexus_core::{Error, HttpResponse};
use toolnexus_host_native::store::FileStore;
use toolnexus_host_native::{agent_tools, serve, Agent, Model, NativeTransport, ServeError};
use toolnexus_host_native::{ServeOptions, Toolkit};

/// Every error in the `source()` chain under `e`, nearest first.
type DynError = dyn std::error::Error + 'static;

fn causes(e: &DynError) -> Vec<&DynError> {
    let mut out = Vec::new();
    let mut next = e.source();
    while let Some(cause) = next {
        out.push(cause);
        next = cause.source();
    }
    out
}

/// The first io error in the chain under `e`.
fn io_cause(e: &DynError) -> Option<&std::io::Error> {
    causes(e).into_iter().find_map(|c| c.downcast_ref())
}

fn options() -> ServeOptions {
    ServeOptions::new(
        Arc::new(Toolkit::new(NativeTransport::shared())),
        Model::Echo,
    )
}

#[tokio::test]
async fn a_refused_connection_is_a_transport_error_over_the_io_error() {
    // A port that was bound a moment ago and is closed now: nothing listens.
    let port = common::free_port();
    let card = format!("http://127.0.0.1:{port}{CARD_PATH}");
    let err = agent_tools(&Agent::new(&card))
        .await
        .err()
        .expect("nothing listens");
    assert!(matches!(err, Error::Transport(_)), "{err:?}");
    assert!(
        err.to_string()
            .starts_with(&format!("fetching the Agent Card {card} failed: ")),
        "{err}"
    );
    let io = io_cause(&err).unwrap_or_else(|| panic!("no io error under {err:?}"));
    assert_eq!(io.kind(), std::io::ErrorKind::ConnectionRefused, "{io}");
}

#[tokio::test]
async fn a_card_that_is_not_json_is_malformed_over_the_json_error() {
    let peer = Stub::start(|_| HttpResponse::json(200, b"{\"name\": ".to_vec())).await;
    let card = peer.card_url();
    let err = agent_tools(&Agent::new(&card))
        .await
        .err()
        .expect("not a card");
    assert!(matches!(err, Error::Malformed(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("the Agent Card is not valid JSON: EOF")
            && text.ends_with(&format!("({card})")),
        "{text}"
    );
    let json = err
        .source()
        .and_then(|c| c.downcast_ref::<serde_json::Error>());
    assert!(json.is_some_and(serde_json::Error::is_eof), "{err:?}");
    peer.handle.stop().await;
}

#[tokio::test]
async fn a_store_folder_that_cannot_be_made_is_a_store_error_over_the_io_error() {
    let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("store-is-a-file-{}", std::process::id()));
    std::fs::write(&file, b"not a folder").expect("write");
    let err = FileStore::open(file.join("tasks"))
        .err()
        .expect("a file is in the way");
    assert!(
        err.to_string()
            .starts_with("cannot create the store folder "),
        "{err}"
    );
    assert!(io_cause(&err).is_some(), "{err:?}");
    let _ = std::fs::remove_file(&file);
}

#[tokio::test]
async fn serve_says_which_part_failed_and_keeps_the_io_error() {
    let mut missing_ui = options();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("no-such-ui-{}", std::process::id()));
    missing_ui.ui_dir = Some(dir.clone());
    let err = serve("127.0.0.1:0", missing_ui)
        .await
        .err()
        .expect("no UI folder");
    assert!(matches!(err, ServeError::Ui { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with(&format!("cannot serve the UI folder {}: ", dir.display())),
        "{err}"
    );
    assert_eq!(
        io_cause(&err).map(std::io::Error::kind),
        Some(std::io::ErrorKind::NotFound)
    );

    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let err = serve(&addr, options())
        .await
        .err()
        .expect("the port is taken");
    assert!(matches!(err, ServeError::Listen { .. }), "{err:?}");
    assert!(
        err.to_string()
            .starts_with(&format!("cannot listen on {addr}: ")),
        "{err}"
    );
    assert_eq!(
        io_cause(&err).map(std::io::Error::kind),
        Some(std::io::ErrorKind::AddrInUse)
    );
}
