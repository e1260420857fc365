//! Server-Sent Events (`text/event-stream`): an incremental decoder for the
//! client half and writers for the server half. No I/O: the host moves bytes.
//!
//! The decoder follows the WHATWG HTML "event stream interpretation" rules:
//!
//! - Lines end with CRLF, LF or a lone CR. A CR at the end of a chunk ends its
//!   line at once; an LF that starts the next chunk is then skipped, so a CRLF
//!   split between two chunks is still one terminator.
//! - One leading UTF-8 byte order mark on the stream is skipped.
//! - Each line is decoded as UTF-8 on its own, lossily (invalid bytes become
//!   U+FFFD). Terminators are ASCII, so this equals decoding the whole stream.
//! - A line starting with `:` is a comment. A line without a colon is a field
//!   name with an empty value. One space after the colon is removed.
//! - `data` appends the value and a LF to the data buffer; `event` sets the
//!   event type; `id` sets the last event ID unless the value contains NUL;
//!   `retry` sets the reconnection time if the value is only ASCII digits.
//!   Other fields are ignored.
//! - A blank line dispatches the event: without the data buffer's final LF,
//!   and only if the data buffer is not empty. Either way the data buffer and
//!   the event type are reset; the last event ID and reconnection time persist.
//! - At the end of the stream ([`SseParser::finish`]) an event that was not
//!   ended by a blank line is discarded, and so is a last line that has no
//!   terminator: it never becomes a line, so even its `id` or `retry` is lost.
//!
//! Run loop for a client: after every [`SseParser::feed`], call
//! [`SseParser::next_event`] until it returns `None`; when the body ends, call
//! [`SseParser::finish`] and drain once more. Stop at the first `Err`.

use std::fmt;

/// The media type of an event stream.
pub const CONTENT_TYPE: &str = "text/event-stream";

/// The default limit on one event's data buffer plus the line being read: 16 MiB.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// The UTF-8 encoding of U+FEFF.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The event type; `None` means the default type, `"message"`.
    pub event: Option<String>,
    /// The data lines joined with `\n`, without a final `\n`.
    pub data: String,
    /// The stream's last event ID when this event was dispatched; `None` if
    /// never set, or reset by an empty `id` field.
    pub id: Option<String>,
    /// The stream's reconnection time in milliseconds when this event was
    /// dispatched, as last set by a valid `retry` field.
    pub retry: Option<u64>,
}

/// Why the decoder stopped. After one, the parser returns the same error forever.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseError {
    /// The peer sent an event (data buffer plus current line) over `limit`
    /// bytes. A misbehaving peer: drop the connection.
    TooLarge {
        /// The limit in bytes, as given to [`SseParser::with_limit`].
        limit: usize,
    },
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseError::TooLarge { limit } => {
                write!(f, "server-sent event larger than the {limit}-byte limit")
            }
        }
    }
}

impl std::error::Error for SseError {}

/// An incremental event stream decoder: bytes in, [`SseEvent`]s out.
#[derive(Debug)]
pub struct SseParser {
    /// Bytes received and not yet dropped; `buf[line_start..]` is unread.
    buf: Vec<u8>,
    /// Where the line being read starts.
    line_start: usize,
    /// Where to resume looking for a terminator: `buf[line_start..scan]` has none.
    scan: usize,
    /// The last line ended with a CR, so an LF that comes next belongs to it.
    skip_lf: bool,
    /// The stream's first bytes have not yet been checked for a BOM.
    bom_pending: bool,
    /// [`SseParser::finish`] was called.
    finished: bool,
    /// Set once; every later call returns it.
    failed: Option<SseError>,
    limit: usize,
    buffers: Buffers,
}

/// The spec's interpretation state, kept apart from the byte buffer so a line
/// borrowed from one can be applied to the other.
#[derive(Debug, Default)]
struct Buffers {
    data: String,
    event_type: String,
    last_event_id: String,
    reconnection_time: Option<u64>,
    comments: u64,
}

impl Default for SseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl SseParser {
    /// A decoder with the default limit, [`DEFAULT_MAX_EVENT_BYTES`].
    pub fn new() -> Self {
        Self::with_limit(DEFAULT_MAX_EVENT_BYTES)
    }

    /// A decoder that fails with [`SseError::TooLarge`] once one event's data
    /// buffer plus the line being read exceeds `max_event_bytes`.
    pub fn with_limit(max_event_bytes: usize) -> Self {
        SseParser {
            buf: Vec::new(),
            line_start: 0,
            scan: 0,
            skip_lf: false,
            bom_pending: true,
            finished: false,
            failed: None,
            limit: max_event_bytes,
            buffers: Buffers::default(),
        }
    }

    /// Appends received bytes, split anywhere. Ignored after `finish` or an error.
    ///
    /// Call [`SseParser::next_event`] until `None` afterwards: the size limit is
    /// enforced there, so undrained input is not bounded.
    pub fn feed(&mut self, chunk: &[u8]) {
        if self.failed.is_some() || self.finished {
            return;
        }
        // Drop the lines already read. Only the partial line moves, and it
        // then starts at 0 until it is complete, so each byte moves about once.
        if self.line_start > 0 {
            self.buf.drain(..self.line_start);
            self.scan -= self.line_start;
            self.line_start = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// Marks the end of the stream: an event not yet ended by a blank line, and
    /// a last line without a terminator, are discarded (WHATWG). Events already
    /// complete are still returned by [`SseParser::next_event`].
    pub fn finish(&mut self) {
        self.finished = true;
    }

    /// The next complete event, `None` if more bytes are needed, or the error
    /// that stopped the decoder (returned again on every later call).
    pub fn next_event(&mut self) -> Option<Result<SseEvent, SseError>> {
        if let Some(err) = &self.failed {
            return Some(Err(err.clone()));
        }
        if self.bom_pending && !self.skip_bom() {
            return None;
        }
        loop {
            if self.skip_lf {
                match self.buf.get(self.line_start) {
                    Some(b'\n') => {
                        self.line_start += 1;
                        self.scan = self.line_start;
                        self.skip_lf = false;
                    }
                    Some(_) => self.skip_lf = false,
                    None => {}
                }
            }
            let unscanned = &self.buf[self.scan..];
            let Some(offset) = unscanned.iter().position(|&b| b == b'\n' || b == b'\r') else {
                self.scan = self.buf.len();
                let partial = self.buf.len() - self.line_start;
                if self.buffers.data.len().saturating_add(partial) > self.limit {
                    return Some(Err(self.fail()));
                }
                if self.finished {
                    self.discard_pending();
                }
                return None;
            };
            let end = self.scan + offset;
            let start = self.line_start;
            if self.buffers.data.len().saturating_add(end - start) > self.limit {
                return Some(Err(self.fail()));
            }
            self.skip_lf = self.buf[end] == b'\r';
            self.line_start = end + 1;
            self.scan = end + 1;
            if let Some(event) = self.buffers.apply_line(&self.buf[start..end]) {
                return Some(Ok(event));
            }
        }
    }

    /// How many comment lines were read (servers send them as heartbeats).
    #[cfg(test)]
    pub fn comments_seen(&self) -> u64 {
        self.buffers.comments
    }

    /// The last event ID set by the stream, to send as `Last-Event-ID` when
    /// reconnecting; `None` if never set or reset by an empty `id`.
    #[cfg(test)]
    pub fn last_event_id(&self) -> Option<&str> {
        non_empty(&self.buffers.last_event_id)
    }

    /// The reconnection time in milliseconds last set by a `retry` field.
    #[cfg(test)]
    pub fn reconnection_time(&self) -> Option<u64> {
        self.buffers.reconnection_time
    }

    /// Skips a leading BOM; false while the bytes so far could still be one.
    fn skip_bom(&mut self) -> bool {
        let head = &self.buf[self.line_start..];
        if head.len() < BOM.len() && BOM.starts_with(head) && !self.finished {
            return false;
        }
        if head.starts_with(BOM) {
            self.line_start += BOM.len();
            self.scan = self.line_start;
        }
        self.bom_pending = false;
        true
    }

    /// Stops the decoder and frees its buffers.
    fn fail(&mut self) -> SseError {
        let err = SseError::TooLarge { limit: self.limit };
        self.failed = Some(err.clone());
        self.buf = Vec::new();
        self.line_start = 0;
        self.scan = 0;
        self.buffers.data = String::new();
        self.buffers.event_type = String::new();
        err
    }

    /// Drops the unterminated line and the undispatched event at end of stream.
    fn discard_pending(&mut self) {
        self.buf.clear();
        self.line_start = 0;
        self.scan = 0;
        self.skip_lf = false;
        self.buffers.data.clear();
        self.buffers.event_type.clear();
    }
}

impl Buffers {
    /// Interprets one line (without its terminator); returns a dispatched event.
    fn apply_line(&mut self, line: &[u8]) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        let (name, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => {
                self.comments += 1;
                return None;
            }
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match name {
            b"data" => {
                crate::wire::http::push_lossy(&mut self.data, value);
                self.data.push('\n');
            }
            b"event" => {
                self.event_type.clear();
                crate::wire::http::push_lossy(&mut self.event_type, value);
            }
            // NUL is ASCII, so it cannot hide inside a multi-byte character.
            b"id" if !value.contains(&0) => {
                self.last_event_id.clear();
                crate::wire::http::push_lossy(&mut self.last_event_id, value);
            }
            b"retry" => {
                if let Some(ms) = parse_digits(value) {
                    self.reconnection_time = Some(ms);
                }
            }
            _ => {}
        }
        None
    }

    /// The blank-line step: an event if the data buffer is not empty; resets
    /// the data buffer and event type either way.
    fn dispatch(&mut self) -> Option<SseEvent> {
        if self.data.is_empty() {
            self.event_type.clear();
            return None;
        }
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        let event_type = std::mem::take(&mut self.event_type);
        Some(SseEvent {
            event: (!event_type.is_empty()).then_some(event_type),
            data,
            id: non_empty(&self.last_event_id).map(str::to_owned),
            retry: self.reconnection_time,
        })
    }
}

/// A `retry` value: ASCII digits only; `None` if empty, other bytes, or beyond u64.
fn parse_digits(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |acc, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

/// Splits on CRLF, LF or CR; `""` is one empty line.
#[cfg(any(test, feature = "server"))]
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let current = rest?;
        match current.find(['\r', '\n']) {
            Some(i) => {
                let crlf = current.as_bytes().get(i..i + 2) == Some(b"\r\n");
                rest = current.get(i + 1 + usize::from(crlf)..);
                current.get(..i)
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}

#[cfg(any(test, feature = "server"))]
/// Appends one event: an `event:` line if given, a `data:` line per line of
/// `data` (CRLF, LF and CR all become `\n`), then a blank line.
///
/// Line breaks in `event` would end the field early, so they are left out.
pub fn write_event(out: &mut Vec<u8>, event: Option<&str>, data: &str) {
    if let Some(event) = event {
        out.extend_from_slice(b"event: ");
        for line in lines(event) {
            out.extend_from_slice(line.as_bytes());
        }
        out.push(b'\n');
    }
    for line in lines(data) {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out.push(b'\n');
}

#[cfg(any(test, feature = "server"))]
/// Appends a comment (`: text`, one line per line of `text`) and a blank line;
/// the idle heartbeat that keeps proxies from closing the stream.
pub fn write_comment(out: &mut Vec<u8>, text: &str) {
    for line in lines(text) {
        out.push(b':');
        if !line.is_empty() {
            out.push(b' ');
            out.extend_from_slice(line.as_bytes());
        }
        out.push(b'\n');
    }
    out.push(b'\n');
}

/// Whether a `Content-Type` value is an event stream, in any case and with any
/// parameters (`text/event-stream; charset=utf-8`).
pub fn is_event_stream(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("");
    essence
        .trim_matches([' ', '\t'])
        .eq_ignore_ascii_case(CONTENT_TYPE)
}

#[cfg(test)]
mod tests {
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    /// Feeds `chunks` one by one, draining after each, then finishes.
    fn decode_chunks(parser: &mut SseParser, chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        let mut drain = |parser: &mut SseParser| {
            while let Some(next) = parser.next_event() {
                match next {
                    Ok(event) => events.push(event),
                    Err(err) => panic!("unexpected error: {err}"),
                }
            }
        };
        for chunk in chunks {
            parser.feed(chunk);
            drain(parser);
        }
        parser.finish();
        drain(parser);
        events
    }

    fn decode(input: &[u8]) -> Vec<SseEvent> {
        decode_chunks(&mut SseParser::new(), &[input])
    }

    /// The one assertion: `input` decodes to `expected`.
    fn check(input: &str, expected: &[SseEvent]) {
        assert_eq!(decode(input.as_bytes()), expected, "input: {input:?}");
    }

    fn message(data: &str) -> SseEvent {
        SseEvent {
            event: None,
            data: data.to_owned(),
            id: None,
            retry: None,
        }
    }

    fn typed(event: &str, data: &str) -> SseEvent {
        SseEvent {
            event: Some(event.to_owned()),
            ..message(data)
        }
    }

    fn with_id(id: &str, event: SseEvent) -> SseEvent {
        SseEvent {
            id: Some(id.to_owned()),
            ..event
        }
    }

    /// An A2A streaming reply with every kind of line, mixed terminators and
    /// multi-byte characters: the fixture for the split tests.
    const A2A_STREAM: &str = "\u{FEFF}: connected\n\
        retry: 3000\r\n\
        id: 1\r\n\
        data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"kind\":\"task\",\"id\":\"t-1\",\"status\":{\"state\":\"submitted\"}}}\r\n\
        \r\n\
        event: status-update\r\
        data: {\"jsonrpc\":\"2.0\",\"id\":1,\r\
        data: \"result\":{\"kind\":\"status-update\",\"text\":\"h\u{e9}llo \u{1F600} \u{4E16}\u{754C}\"}}\r\
        \r\
        :\n\
        id: 2\n\
        data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"kind\":\"artifact-update\",\"final\":true}}\n\
        \n";

    fn a2a_stream_events() -> Vec<SseEvent> {
        let with_retry = |event: SseEvent| SseEvent {
            retry: Some(3000),
            ..event
        };
        vec![
            with_retry(with_id("1", message(
                r#"{"jsonrpc":"2.0","id":1,"result":{"kind":"task","id":"t-1","status":{"state":"submitted"}}}"#,
            ))),
            with_retry(with_id("1", typed(
                "status-update",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\n\"result\":{\"kind\":\"status-update\",\"text\":\"h\u{e9}llo \u{1F600} \u{4E16}\u{754C}\"}}",
            ))),
            with_retry(with_id("2", message(
                r#"{"jsonrpc":"2.0","id":1,"result":{"kind":"artifact-update","final":true}}"#,
            ))),
        ]
    }

    #[test]
    fn lf_terminated_event_is_dispatched() {
        check("data: hello\n\n", &[message("hello")]);
    }

    #[test]
    fn crlf_terminators() {
        check(
            "data: a\r\n\r\ndata: b\r\n\r\n",
            &[message("a"), message("b")],
        );
    }

    #[test]
    fn lone_cr_terminators() {
        check("data: a\r\rdata: b\r\r", &[message("a"), message("b")]);
    }

    #[test]
    fn mixed_terminators_in_one_stream() {
        check("data: a\rdata: b\r\ndata: c\n\r\n", &[message("a\nb\nc")]);
    }

    #[test]
    fn comments_are_ignored_and_counted() {
        let mut parser = SseParser::new();
        let events = decode_chunks(
            &mut parser,
            &[
                b": heartbeat\n\n",
                b":\n",
                b"data: x\n: inside\n\n",
                b": ping\n\n",
            ],
        );
        assert_eq!(events, [message("x")]);
        assert_eq!(parser.comments_seen(), 4);
    }

    #[test]
    fn multi_line_data_is_joined_with_lf() {
        check(
            "data: one\ndata: two\ndata: three\n\n",
            &[message("one\ntwo\nthree")],
        );
    }

    #[test]
    fn data_without_space_and_only_one_space_removed() {
        check("data:tight\n\n", &[message("tight")]);
        check("data:  two spaces\n\n", &[message(" two spaces")]);
        check("data: a:b: c\n\n", &[message("a:b: c")]);
    }

    #[test]
    fn field_without_colon_has_empty_value() {
        check("data\n\n", &[message("")]);
        check("data\ndata\n\n", &[message("\n")]);
        check("data:\n\n", &[message("")]);
        check("event\ndata: x\n\n", &[message("x")]);
    }

    #[test]
    fn unknown_fields_are_ignored() {
        check(
            "foo: bar\nData: no\ndata : no\ndata: yes\n\n",
            &[message("yes")],
        );
    }

    #[test]
    fn event_field_sets_the_type_of_one_event_only() {
        check(
            "event: status\ndata: a\n\ndata: b\n\nevent: first\nevent: second\ndata: c\n\n",
            &[typed("status", "a"), message("b"), typed("second", "c")],
        );
    }

    #[test]
    fn id_persists_until_changed_and_nul_ids_are_ignored() {
        let mut parser = SseParser::new();
        let events = decode_chunks(
            &mut parser,
            &[b"id: 7\ndata: a\n\ndata: b\n\nid: 8\0x\ndata: c\n\nid\ndata: d\n\n"],
        );
        assert_eq!(
            events,
            [
                with_id("7", message("a")),
                with_id("7", message("b")),
                with_id("7", message("c")),
                message("d"),
            ]
        );
        assert_eq!(parser.last_event_id(), None);
    }

    #[test]
    fn id_without_data_still_sets_last_event_id() {
        let mut parser = SseParser::new();
        assert!(decode_chunks(&mut parser, &[b"id: 42\n\n"]).is_empty());
        assert_eq!(parser.last_event_id(), Some("42"));
    }

    #[test]
    fn retry_accepts_ascii_digits_only() {
        let retry = |ms| SseEvent {
            retry: Some(ms),
            ..message("x")
        };
        check("retry: 1500\ndata: x\n\n", &[retry(1500)]);
        check(
            "retry: 10\nretry: 1.5\nretry: -1\nretry: 2s\nretry:\nretry: +3\ndata: x\n\n",
            &[retry(10)],
        );
        check(
            "retry: 99999999999999999999999\ndata: x\n\n",
            &[message("x")],
        );

        let mut parser = SseParser::new();
        assert!(decode_chunks(&mut parser, &[b"retry: 250\n\n"]).is_empty());
        assert_eq!(parser.reconnection_time(), Some(250));
    }

    #[test]
    fn empty_data_events_are_not_dispatched_but_reset_the_type() {
        check("event: lost\n\ndata: x\n\n", &[message("x")]);
        check("\n\n\nid: 1\n\n", &[]);
    }

    #[test]
    fn invalid_utf8_is_replaced_not_a_panic() {
        assert_eq!(
            decode(b"event: \xFFt\ndata: a\xC3\ndata: \xE2\x82\n\n"),
            [typed("\u{FFFD}t", "a\u{FFFD}\n\u{FFFD}")]
        );
    }

    #[test]
    fn every_split_point_of_an_a2a_stream_gives_the_same_events() {
        let bytes = A2A_STREAM.as_bytes();
        let expected = a2a_stream_events();
        assert_eq!(decode(bytes), expected);
        for split in 0..=bytes.len() {
            let (a, b) = bytes.split_at(split);
            let events = decode_chunks(&mut SseParser::new(), &[a, b]);
            assert_eq!(events, expected, "split at {split}");
        }
        let one_by_one: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(decode_chunks(&mut SseParser::new(), &one_by_one), expected);
    }

    #[test]
    fn every_pair_of_split_points_gives_the_same_events() {
        let bytes = "\u{FEFF}event: \u{e9}\r\ndata: \u{1F600}\r\r\nid: 1\ndata\r\n\r\n".as_bytes();
        let expected = decode(bytes);
        assert_eq!(
            expected,
            [typed("\u{e9}", "\u{1F600}"), with_id("1", message(""))]
        );
        for i in 0..=bytes.len() {
            for j in i..=bytes.len() {
                let chunks = [&bytes[..i], &bytes[i..j], &bytes[j..]];
                let events = decode_chunks(&mut SseParser::new(), &chunks);
                assert_eq!(events, expected, "split at {i} and {j}");
            }
        }
    }

    #[test]
    fn split_inside_a_multibyte_character() {
        let bytes = "data: \u{1F600}\n\n".as_bytes();
        for split in 7..10 {
            let (a, b) = bytes.split_at(split);
            let events = decode_chunks(&mut SseParser::new(), &[a, b]);
            assert_eq!(events, [message("\u{1F600}")], "split at {split}");
        }
    }

    #[test]
    fn split_between_cr_and_lf_is_one_terminator() {
        // An extra blank line would reset the event type before `data`.
        let events = decode_chunks(
            &mut SseParser::new(),
            &[b"event: x\r", b"\ndata: a\r\n\r", b"\n"],
        );
        assert_eq!(events, [typed("x", "a")]);

        // The blank line ending in CR dispatches without waiting for the LF.
        let mut parser = SseParser::new();
        parser.feed(b"data: a\r\n\r");
        assert_eq!(parser.next_event(), Some(Ok(message("a"))));
        parser.feed(b"\n\r\n");
        assert_eq!(parser.next_event(), None);
    }

    #[test]
    fn leading_bom_is_skipped_once() {
        check("\u{FEFF}data: a\n\n", &[message("a")]);
        check("\u{FEFF}\u{FEFF}data: a\n\ndata: b\n\n", &[message("b")]);
        check("data: \u{FEFF}a\n\n", &[message("\u{FEFF}a")]);
        let split = decode_chunks(
            &mut SseParser::new(),
            &[b"\xEF", b"\xBB", b"\xBFdata: a\n\n"],
        );
        assert_eq!(split, [message("a")]);
    }

    #[test]
    fn eof_discards_an_incomplete_event() {
        check("data: a\n\ndata: b\n", &[message("a")]);
        check("data: a\n\ndata: b", &[message("a")]);
        check("data: a\n\ndata: b\r", &[message("a")]);

        // A last line without a terminator is not a line: its `id` is lost too.
        let mut parser = SseParser::new();
        decode_chunks(&mut parser, &[b"id: 1\ndata: a\n\nid: 2"]);
        assert_eq!(parser.last_event_id(), Some("1"));
    }

    #[test]
    fn finish_still_returns_complete_events_and_ignores_later_bytes() {
        let mut parser = SseParser::new();
        parser.feed(b"data: a\n\ndata: b\n\ndata: c");
        parser.finish();
        parser.feed(b"\n\n");
        assert_eq!(parser.next_event(), Some(Ok(message("a"))));
        assert_eq!(parser.next_event(), Some(Ok(message("b"))));
        assert_eq!(parser.next_event(), None);
        assert_eq!(parser.next_event(), None);
    }

    #[test]
    fn size_limit_stops_the_parser_with_the_same_error() {
        let too_large = Some(Err(SseError::TooLarge { limit: 16 }));

        // 16 bytes of data plus line exactly: allowed.
        let mut parser = SseParser::with_limit(16);
        parser.feed(b"data: 0123456789\n\n");
        assert_eq!(parser.next_event(), Some(Ok(message("0123456789"))));

        // The data buffer counts toward the next line.
        parser.feed(b"data: 01234\ndata: 56789\n\n");
        assert_eq!(parser.next_event(), too_large);
        assert_eq!(parser.next_event(), too_large);
        parser.feed(b"data: ok\n\n");
        assert_eq!(parser.next_event(), too_large);

        // A line that never ends is caught before its terminator arrives.
        let mut parser = SseParser::with_limit(16);
        parser.feed(b"data: 0123456789");
        assert_eq!(parser.next_event(), None);
        parser.feed(b"x");
        assert_eq!(parser.next_event(), too_large);

        assert_eq!(
            SseError::TooLarge { limit: 16 }.to_string(),
            "server-sent event larger than the 16-byte limit"
        );
        assert_eq!(SseParser::new().limit, 16 * 1024 * 1024);
    }

    #[test]
    fn many_small_events_are_not_limited_together() {
        let mut stream = Vec::new();
        for _ in 0..10 {
            write_event(&mut stream, None, "0123456789");
        }
        let events = decode_chunks(&mut SseParser::with_limit(16), &[&stream]);
        assert_eq!(events, vec![message("0123456789"); 10]);
    }

    #[test]
    fn writer_emits_event_data_lines_and_blank_line() {
        let mut out = Vec::new();
        write_event(&mut out, Some("status-update"), "a\r\nb\rc\nd");
        write_event(&mut out, None, "");
        write_event(&mut out, Some("bad\r\nname"), "x");
        assert_eq!(
            String::from_utf8_lossy(&out),
            "event: status-update\ndata: a\ndata: b\ndata: c\ndata: d\n\n\
             data: \n\n\
             event: badname\ndata: x\n\n"
        );
    }

    #[test]
    fn comment_writer_makes_a_heartbeat() {
        let mut out = Vec::new();
        write_comment(&mut out, "keep-alive");
        write_comment(&mut out, "two\nlines");
        write_comment(&mut out, "");
        assert_eq!(
            String::from_utf8_lossy(&out),
            ": keep-alive\n\n: two\n: lines\n\n:\n\n"
        );
        let mut parser = SseParser::new();
        assert!(decode_chunks(&mut parser, &[&out]).is_empty());
        assert_eq!(parser.comments_seen(), 4);
    }

    #[test]
    fn round_trip_writer_to_parser_keeps_data_with_newlines() {
        let cases: &[(Option<&str>, &str)] = &[
            (None, "plain"),
            (None, ""),
            (Some("status-update"), "line one\nline two"),
            (None, "trailing\n"),
            (None, "\n\nblank lines\n\n"),
            (None, " leading space"),
            (
                Some("message"),
                "colon: inside\n: comment-like\ndata: nested",
            ),
            (None, "unicode \u{1F600} \u{4E16}\u{754C}"),
        ];
        let mut stream = Vec::new();
        for (event, data) in cases {
            write_event(&mut stream, *event, data);
            write_comment(&mut stream, "heartbeat");
        }
        let expected: Vec<SseEvent> = cases
            .iter()
            .map(|(event, data)| SseEvent {
                event: event.map(str::to_owned),
                ..message(data)
            })
            .collect();
        assert_eq!(decode(&stream), expected);

        // CRLF and CR in data come back as LF.
        let mut out = Vec::new();
        write_event(&mut out, None, "a\r\nb\rc");
        assert_eq!(decode(&out), [message("a\nb\nc")]);
    }

    #[test]
    fn typical_a2a_jsonrpc_stream() {
        let replies = [
            r#"{"jsonrpc":"2.0","id":1,"result":{"kind":"status-update","taskId":"t-1","status":{"state":"working"},"final":false}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"kind":"artifact-update","taskId":"t-1","artifact":{"parts":[{"kind":"text","text":"hi"}]}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"kind":"status-update","taskId":"t-1","status":{"state":"completed"},"final":true}}"#,
        ];
        let expected: Vec<SseEvent> = replies.iter().map(|r| message(r)).collect();
        for terminator in ["\n", "\r\n"] {
            let stream: String = replies
                .iter()
                .map(|r| format!("data: {r}{terminator}{terminator}"))
                .collect();
            check(&stream, &expected);
        }
    }

    #[test]
    fn event_stream_content_type_is_recognised() {
        assert!(is_event_stream(CONTENT_TYPE));
        assert!(is_event_stream("text/event-stream; charset=utf-8"));
        assert!(is_event_stream("Text/Event-Stream;charset=UTF-8"));
        assert!(is_event_stream(" text/event-stream "));
        assert!(!is_event_stream("application/json"));
        assert!(!is_event_stream("text/event-streams"));
        assert!(!is_event_stream(""));
    }
}
