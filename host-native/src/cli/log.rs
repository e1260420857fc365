//! The CLI's `tracing` subscriber: each warning or error the libraries log
//! becomes one `toolnexus: <message>` line on stderr, as the CLI has always
//! printed them. Hand-written, since this is all a command needs and it
//! costs nothing at start-up.

use std::fmt::Write as _;
use std::io::Write as _;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// Installs the subscriber for the whole process (once, before any work).
pub fn install() {
    // Fails only when a subscriber is already set, which is then the one to keep.
    let _ = tracing::subscriber::set_global_default(StderrLines);
}

struct StderrLines;

/// This project's own crates; other crates' events are not the CLI's to print.
fn ours(target: &str) -> bool {
    target.starts_with("toolnexus")
}

impl Subscriber for StderrLines {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= Level::WARN && ours(metadata.target())
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::WARN)
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        // Spans carry nothing this subscriber prints; one id serves them all.
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut line = Message(String::new());
        event.record(&mut line);
        // A closed stderr must not stop the command.
        // Messages quote peers (a remote agent's error): nothing in them acts on the terminal.
        let _ = writeln!(
            std::io::stderr().lock(),
            "toolnexus: {}",
            super::terminal::line(&line.0)
        );
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// The `message` field of an event; its other fields are for structured subscribers.
struct Message(String);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        }
    }
}
