//! The CLI's `tracing` subscribers. By default each warning or error the
//! libraries log, and each line of the CLI's own (target `toolnexus`),
//! becomes one `toolnexus: <message>` line on stderr, as the CLI has always
//! printed them: hand-written, it costs nothing at start-up. With
//! `serve --log-format json|text` (or RUST_LOG set), structured lines
//! filtered by RUST_LOG (`tracing-subscriber`'s `EnvFilter`), each with the
//! trace id of the request or task it belongs to.

use std::fmt::Write as _;
use std::io::Write as _;
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// The structured line formats.
#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
pub enum Format {
    Json,
    Text,
}

/// Installs the subscriber for the whole process (once, before any work):
/// structured lines when `format` is given or RUST_LOG is set, else the
/// short lines.
pub fn install(format: Option<Format>) {
    let rust_log = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let format = match (format, &rust_log) {
        (Some(f), _) => f,
        (None, Some(_)) => Format::Text,
        // Fails only when a subscriber is already set, which is then the one to keep.
        (None, None) => {
            let _ = tracing::subscriber::set_global_default(StderrLines);
            return;
        }
    };
    use tracing_subscriber::layer::SubscriberExt as _;
    let filter = rust_log
        .and_then(|v| tracing_subscriber::EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("info"));
    let subscriber = tracing_subscriber::registry()
        .with(filter)
        .with(Lines(format));
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// Structured lines, one per event.
struct Lines(Format);

impl<S: Subscriber> tracing_subscriber::Layer<S> for Lines {
    fn on_event(&self, event: &Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        #[cfg(feature = "otel")]
        if !fields.0.contains_key("trace_id") {
            if let Some(trace) = toolnexus_host_native::otel::current_trace_id() {
                fields.0.insert("trace_id".into(), trace.into());
            }
        }
        let meta = event.metadata();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let time = toolnexus_core::format_rfc3339(now);
        let message = fields
            .0
            .remove("message")
            .and_then(|m| m.as_str().map(str::to_string))
            .unwrap_or_default();
        let line = match self.0 {
            Format::Json => {
                let mut line = serde_json::Map::new();
                line.insert("timestamp".into(), time.into());
                line.insert("level".into(), meta.level().as_str().into());
                line.insert("target".into(), meta.target().into());
                line.insert("message".into(), message.into());
                line.extend(fields.0);
                serde_json::Value::Object(line).to_string()
            }
            Format::Text => {
                let mut line = format!(
                    "{time} {:>5} {}: {}",
                    meta.level().as_str(),
                    meta.target(),
                    super::terminal::line(&message)
                );
                for (k, v) in fields.0 {
                    let v = match v {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    };
                    let _ = write!(line, " {k}={}", super::terminal::line(&v));
                }
                line
            }
        };
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }
}

/// An event's fields as JSON values.
#[derive(Default)]
struct Fields(serde_json::Map<String, serde_json::Value>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
}

struct StderrLines;

/// This project's own crates; other crates' events are not the CLI's to print.
fn ours(target: &str) -> bool {
    target.starts_with("toolnexus")
}

impl Subscriber for StderrLines {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        let level = *metadata.level();
        // The libraries' warnings and errors; the CLI's own lines (target
        // `toolnexus`) from info up.
        (level <= Level::WARN && ours(metadata.target()))
            || (level <= Level::INFO && metadata.target() == "toolnexus")
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::INFO)
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
