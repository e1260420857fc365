//! The LLM client loop (OpenAI and Anthropic styles) as a state machine.
//!
//! [`RunMachine`] holds the conversation: it asks for a model request
//! (`Step::Send`), reads the reply, asks for the turn's tool calls to be
//! run (`Step::Work`), feeds the results back and repeats until a
//! reply has no tool calls or `max_turns` model calls were made
//! (`Step::Done`). It never performs I/O; [`run`] drives it over a
//! [`Transport`] and runs each turn's tool calls concurrently.
//!
//! The rule every input follows: it returns exactly one [`LlmStep`], the next
//! thing to do. An input that does not fit the current step (a response when
//! tool results were asked for, wrong result count) ends the run with
//! [`Error::Misuse`]; once finished, every input returns the same `Done` again.
//!
//! Secrets (the API key, header values) never appear in error messages or in
//! `Debug` output: peers that echo them back are redacted.

pub mod question;

use crate::error::{Error, Reason, TransportError};
use crate::host::driver::{Machine, ResponseHead, Step};
use crate::host::transport::Transport;
use crate::model::task::{Message, Role};
use crate::model::tool::{to_anthropic, to_openai, ToolResult, ToolSpec};
use crate::wire::http::{replace_str, HttpRequest, HttpResponse};
use crate::wire::json::{object, with};
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

/// Model calls per run when not configured.
pub const DEFAULT_MAX_TURNS: u32 = 10;
/// Anthropic's required `max_tokens` when not configured.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// How long one model request may take when not configured.
pub const DEFAULT_LLM_TIMEOUT_MS: u64 = 120_000;
/// The `anthropic-version` header sent to Anthropic-style endpoints.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// How much of a failing reply's body goes into an error message.
const SNIPPET_CHARS: usize = 300;
/// Shorter secrets are not redacted: they would match ordinary words in the
/// message (and cannot be real credentials).
const MIN_SECRET_CHARS: usize = 6;
const REDACTED: &str = "[redacted]";

/// The wire dialect of the model endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmStyle {
    /// `POST {baseUrl}/chat/completions`, Bearer key, `role:"tool"` results.
    OpenAi,
    /// `POST {baseUrl}/v1/messages`, `x-api-key`, `tool_result` blocks.
    Anthropic,
}

impl LlmStyle {
    /// `"openai"` or `"anthropic"`.
    pub fn as_str(self) -> &'static str {
        match self {
            LlmStyle::OpenAi => "openai",
            LlmStyle::Anthropic => "anthropic",
        }
    }
}

impl fmt::Display for LlmStyle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for LlmStyle {
    type Err = Error;
    /// Parses `"openai"` or `"anthropic"` (case-insensitive).
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openai" => Ok(LlmStyle::OpenAi),
            "anthropic" => Ok(LlmStyle::Anthropic),
            _ => Err(Error::Misuse(format!(
                "unknown LLM style {}: expected \"openai\" or \"anthropic\"",
                crate::wire::json::quoted(s)
            ))),
        }
    }
}

/// Where and how to reach the model. `Debug` hides the key and header values.
///
/// Build it with [`LlmConfig::new`] and the `with_*` methods (new options
/// may be added, so it cannot be built as a struct literal outside this crate).
#[non_exhaustive]
#[derive(Clone)]
pub struct LlmConfig {
    pub base_url: String,
    pub style: LlmStyle,
    pub model: String,
    pub api_key: Option<String>,
    /// Extra headers; one named like a default header (`Authorization`,
    /// `anthropic-version`, …) replaces it.
    pub headers: Vec<(String, String)>,
    pub system_prompt: Option<String>,
    /// Model calls per run (at least one is always made).
    pub max_turns: u32,
    /// Sent to Anthropic-style endpoints, which require it.
    pub max_tokens: u32,
    /// Per model request.
    pub timeout: Duration,
    /// The trace the model calls are made in (W3C trace context): each call
    /// carries it on as a span of its own.
    pub trace: Option<crate::TraceContext>,
}

impl LlmConfig {
    /// A config with the defaults: no key, no extra headers, no system prompt,
    /// [`DEFAULT_MAX_TURNS`], [`DEFAULT_MAX_TOKENS`], [`DEFAULT_LLM_TIMEOUT_MS`].
    pub fn new(base_url: impl Into<String>, style: LlmStyle, model: impl Into<String>) -> Self {
        LlmConfig {
            base_url: base_url.into(),
            style,
            model: model.into(),
            api_key: None,
            headers: Vec::new(),
            system_prompt: None,
            max_turns: DEFAULT_MAX_TURNS,
            max_tokens: DEFAULT_MAX_TOKENS,
            timeout: Duration::from_millis(DEFAULT_LLM_TIMEOUT_MS),
            trace: None,
        }
    }

    /// Sets the API key (sent as `Authorization: Bearer` or `x-api-key`).
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Adds a request header (one named like a default header replaces it).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the system prompt.
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Sets how many model calls one run may make (at least one is made).
    pub fn with_max_turns(mut self, turns: u32) -> Self {
        self.max_turns = turns;
        self
    }

    /// Sets `max_tokens` (Anthropic-style endpoints require it).
    pub fn with_max_tokens(mut self, tokens: u32) -> Self {
        self.max_tokens = tokens;
        self
    }

    /// Sets the time limit of each model request.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The URL model requests go to: `{base}/chat/completions` (openai) or
    /// `{base}/v1/messages` (anthropic; `/v1` is not doubled), without doubled slashes.
    pub fn endpoint(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        match self.style {
            LlmStyle::OpenAi => format!("{base}/chat/completions"),
            LlmStyle::Anthropic if base.ends_with("/v1") => format!("{base}/messages"),
            LlmStyle::Anthropic => format!("{base}/v1/messages"),
        }
    }

    fn request_headers(&self) -> Vec<(String, String)> {
        let mut headers = vec![("Content-Type".to_string(), "application/json".to_string())];
        match (self.style, &self.api_key) {
            (LlmStyle::OpenAi, Some(key)) => {
                headers.push(("Authorization".into(), format!("Bearer {key}")))
            }
            (LlmStyle::Anthropic, Some(key)) => headers.push(("x-api-key".into(), key.clone())),
            (_, None) => {}
        }
        if self.style == LlmStyle::Anthropic {
            headers.push(("anthropic-version".into(), ANTHROPIC_VERSION.into()));
        }
        headers.retain(|(name, _)| {
            !self
                .headers
                .iter()
                .any(|(h, _)| h.eq_ignore_ascii_case(name))
        });
        headers.extend(self.headers.iter().cloned());
        headers
    }

    /// `text` with every secret (the key, header values) replaced.
    fn redact(&self, text: String) -> String {
        let secrets = self
            .api_key
            .iter()
            .chain(self.headers.iter().map(|(_, v)| v));
        secrets
            .filter(|s| s.chars().count() >= MIN_SECRET_CHARS)
            .fold(text, |text, secret| replace_str(&text, secret, REDACTED))
    }

    /// Whether an error's cause may be kept: its text holds no secret.
    fn may_keep(&self, cause: &crate::error::Cause) -> bool {
        let text = cause.to_string();
        self.redact(text.clone()) == text
    }

    fn redact_error(&self, e: Error) -> Error {
        match e {
            Error::Transport(e) => {
                Error::Transport(e.map(|m| self.redact(m), |c| self.may_keep(c)))
            }
            Error::Malformed(r) => {
                Error::Malformed(r.map(|m| self.redact(m), |c| self.may_keep(c)))
            }
            Error::Misuse(m) => Error::Misuse(self.redact(m)),
            Error::Status { status, url, body } => Error::Status {
                status,
                url: self.redact(url),
                body: self.redact(body),
            },
            other => other,
        }
    }
}

impl fmt::Debug for LlmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(k, _)| (k.as_str(), REDACTED))
            .collect();
        f.debug_struct("LlmConfig")
            .field("base_url", &self.base_url)
            .field("style", &self.style)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("headers", &headers)
            .field("system_prompt", &self.system_prompt)
            .field("max_turns", &self.max_turns)
            .field("max_tokens", &self.max_tokens)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Token counts summed over every model call of a run (missing counts are 0).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

impl Usage {
    fn add(&mut self, other: &Usage) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
    }
}

/// A tool call the model asked for, with its arguments parsed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
    /// The model call that asked for it (1 for the first): its span is the
    /// `n`th child of the run's trace ([`crate::TraceContext::nth_child`]).
    #[serde(skip)]
    pub turn: u32,
}

/// One tool call of a run and its outcome. `arguments` is the raw text when
/// the model sent arguments that are not a JSON object (the tool was not called).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRecord {
    pub name: String,
    pub arguments: Value,
    pub output: String,
    pub is_error: bool,
}

/// The outcome of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    /// The last model reply's text (joined text blocks for anthropic).
    pub text: String,
    pub tool_calls: Vec<ToolCallRecord>,
    pub tool_call_count: usize,
    /// Model calls made.
    pub turns: u32,
    pub usage: Usage,
    /// The model named in the last reply, else the configured one.
    pub model: String,
    /// The request of the tool call that suspended the run (toolnexus SPEC
    /// §10: a result whose `metadata.pending` is a `Request`): the run
    /// halted there, and `text` is its prompt. `None` when the run ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending: Option<Value>,
}

/// The suspension a tool result carries: its `metadata.pending`, when that
/// is a `Request` (an object with a string `prompt`; `id` and `kind` as the
/// reference writes them).
pub fn pending_request(result: &ToolResult) -> Option<&Value> {
    result
        .metadata
        .as_ref()?
        .get("pending")
        .filter(|p| p.get("prompt").is_some_and(Value::is_string))
}

/// What a [`RunMachine`] wants next: a model request ([`Step::Send`]), the
/// turn's tool calls ([`Step::Work`]: run them, in any order, concurrently
/// is fine, then pass their results in this order to
/// [`RunMachine::handle_tool_results`]), or the end.
pub type LlmStep = Step<Result<RunResult, Error>, Vec<ToolCall>>;

/// A tool call of the current turn. `rejected` holds the error text fed back
/// instead of calling the tool (its arguments were unusable).
#[derive(Debug)]
struct PendingCall {
    call: ToolCall,
    rejected: Option<String>,
}

/// One parsed model reply.
struct Turn {
    text: String,
    calls: Vec<PendingCall>,
    /// The assistant message to append to the conversation.
    assistant: Value,
    usage: Usage,
    model: Option<String>,
}

#[derive(Debug)]
enum Phase {
    Ready,
    Model,
    Tools(Vec<PendingCall>),
    Finished(Result<RunResult, Error>),
}

/// One LLM run: the conversation, the turn count and the usage so far.
/// Create it, then run it with [`run`] (or feed it inputs yourself).
#[derive(Debug)]
pub struct RunMachine {
    cfg: LlmConfig,
    url: String,
    /// The tools in the provider's shape, computed once.
    tools: Vec<Value>,
    messages: Vec<Value>,
    phase: Phase,
    turns: u32,
    usage: Usage,
    model: Option<String>,
    records: Vec<ToolCallRecord>,
    text: String,
    pending: Option<Value>,
    /// When the model call under way was sent (for its span).
    sent_ms: u64,
    /// Gets each model call of a traced run as a span (`chat {model}`):
    /// the toolkit's hook ([`crate::Toolkit::with_span_hook`]).
    pub(crate) spans: SpanSlot,
}

/// A run's span hook (a closure: shown only as set or not).
#[derive(Default)]
pub(crate) struct SpanSlot(Option<crate::SpanHook>);

impl fmt::Debug for SpanSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() { "hook" } else { "none" })
    }
}

impl RunMachine {
    pub fn new(cfg: LlmConfig, prompt: String, tools: Vec<ToolSpec>) -> Self {
        Self::with_history(cfg, &[], prompt, tools)
    }

    /// [`RunMachine::new`] for a conversation: the earlier turns (user
    /// messages, and the agent's as the assistant's) come before `prompt`.
    pub fn with_history(
        cfg: LlmConfig,
        history: &[Message],
        prompt: String,
        tools: Vec<ToolSpec>,
    ) -> Self {
        let mut messages = Vec::new();
        let system = cfg.system_prompt.as_deref().filter(|s| !s.is_empty());
        if let (LlmStyle::OpenAi, Some(system)) = (cfg.style, system) {
            messages.push(object([
                ("role", "system".into()),
                ("content", system.into()),
            ]));
        }
        for m in history {
            let role = match m.role {
                Role::User => "user",
                Role::Agent => "assistant",
            };
            let text = m.text();
            // Providers refuse empty turns; anthropic also wants turns to
            // alternate, so a role speaking twice in a row is one turn.
            if text.is_empty() {
                continue;
            }
            match messages.last_mut() {
                Some(last) if last["role"] == role => {
                    let joined = format!("{}\n\n{text}", last["content"].as_str().unwrap_or(""));
                    set_content(last, joined);
                }
                _ => messages.push(object([("role", role.into()), ("content", text.into())])),
            }
        }
        match messages.last_mut() {
            Some(last) if last["role"] == "user" => {
                let joined = format!("{}\n\n{prompt}", last["content"].as_str().unwrap_or(""));
                set_content(last, joined);
            }
            _ => messages.push(object([
                ("role", "user".into()),
                ("content", prompt.into()),
            ])),
        }
        let tools = match cfg.style {
            LlmStyle::OpenAi => to_openai(&tools),
            LlmStyle::Anthropic => to_anthropic(&tools),
        };
        RunMachine {
            url: cfg.endpoint(),
            cfg,
            tools,
            messages,
            phase: Phase::Ready,
            turns: 0,
            usage: Usage::default(),
            model: None,
            records: Vec::new(),
            text: String::new(),
            pending: None,
            sent_ms: 0,
            spans: SpanSlot::default(),
        }
    }

    /// Model calls made so far.
    pub fn turns(&self) -> u32 {
        self.turns
    }

    /// The first step: the first model request.
    pub fn start(&mut self, now_ms: u64) -> LlmStep {
        match self.phase {
            Phase::Ready => self.send_model(now_ms),
            _ => self.out_of_order("start"),
        }
    }

    /// The answer (or transport failure) to the last `Send`.
    pub fn handle_response(
        &mut self,
        now_ms: u64,
        response: Result<HttpResponse, TransportError>,
    ) -> LlmStep {
        if !matches!(self.phase, Phase::Model) {
            return self.out_of_order("handle_response");
        }
        if self.spans.0.is_none() || self.cfg.trace.is_none() {
            return self.answered(now_ms, response);
        }
        let status = response.as_ref().map_or(0, |r| r.status);
        let before = (self.usage.prompt_tokens, self.usage.completion_tokens);
        let step = self.answered(now_ms, response);
        self.model_span(now_ms, status, Some(before));
        step
    }

    /// The span of the model call that just ended (`status` 0: no answer;
    /// `before`: the usage before its answer, `None` when none came).
    fn model_span(&self, now_ms: u64, status: u16, before: Option<(u64, u64)>) {
        let (Some(hook), Some(trace)) = (&self.spans.0, &self.cfg.trace) else {
            return;
        };
        let mut span = crate::SpanRecord::new(
            crate::wire::trace::joined("chat ", &self.cfg.model),
            crate::SpanKind::Client,
            trace.nth_child(self.turns),
            trace.span_id,
            self.sent_ms,
        );
        span.set("gen_ai.operation.name", "chat");
        span.set("gen_ai.provider.name", self.cfg.style.as_str());
        span.set("gen_ai.request.model", self.cfg.model.as_str());
        span.set("server.address", crate::wire::http::authority(&self.url));
        if status > 0 {
            span.set(
                "http.response.status_code",
                crate::wire::trace::decimal(status.into()),
            );
        }
        let reported = before.filter(|_| (200..300).contains(&status));
        if let Some((input, output)) = reported {
            let used = &self.usage;
            if (used.prompt_tokens, used.completion_tokens) != (input, output) {
                let input = used.prompt_tokens.saturating_sub(input);
                let output = used.completion_tokens.saturating_sub(output);
                span.set(
                    "gen_ai.usage.input_tokens",
                    crate::wire::trace::decimal(input),
                );
                span.set(
                    "gen_ai.usage.output_tokens",
                    crate::wire::trace::decimal(output),
                );
            }
            if let Some(model) = &self.model {
                span.set("gen_ai.response.model", model.as_str());
            }
        }
        span.error = status == 0 || matches!(self.phase, Phase::Finished(Err(_)));
        if span.error {
            let kind = if status == 0 { "transport" } else { "model" };
            span.set("error.type", kind);
        }
        span.end(hook, now_ms);
    }

    fn answered(&mut self, now_ms: u64, response: Result<HttpResponse, TransportError>) -> LlmStep {
        let url = self.url.clone();
        let resp = match response {
            Ok(resp) => resp,
            Err(e) => {
                return self.fail(Error::Transport(TransportError::with_source(
                    format!("LLM request to {url} failed: {e}"),
                    e,
                )))
            }
        };
        if !resp.is_success() {
            let body = resp.body_snippet(SNIPPET_CHARS);
            return self.fail(Error::Status {
                status: resp.status,
                url,
                body,
            });
        }
        let reply = match serde_json::from_slice::<Value>(&resp.body) {
            Ok(reply) => reply,
            Err(e) => {
                let snippet = resp.body_snippet(SNIPPET_CHARS);
                return self.fail(Error::Malformed(Reason::with_source(
                    format!("LLM reply from {url} is not JSON: {snippet}"),
                    e,
                )));
            }
        };
        let parsed = match self.cfg.style {
            LlmStyle::OpenAi => parse_openai(&reply, self.turns),
            LlmStyle::Anthropic => parse_anthropic(&reply),
        };
        let turn = match parsed {
            Ok(turn) => turn,
            Err(what) => return self.fail(Error::malformed(malformed(&url, &reply, &what))),
        };
        self.usage.add(&turn.usage);
        if turn.model.is_some() {
            self.model = turn.model;
        }
        self.text = turn.text;
        // At max_turns the calls are not run: no model call would read their results.
        if turn.calls.is_empty() || self.turns >= self.cfg.max_turns.max(1) {
            return self.succeed();
        }
        self.messages.push(turn.assistant);
        let mut calls: Vec<ToolCall> = Vec::new();
        // A plain loop, not an iterator chain (see ARCHITECTURE.md).
        for p in &turn.calls {
            if p.rejected.is_none() {
                let mut call = p.call.clone();
                call.turn = self.turns;
                calls.push(call);
            }
        }
        self.phase = Phase::Tools(turn.calls);
        if calls.is_empty() {
            // Every call was rejected: feed the errors back without a tool round.
            return self.handle_tool_results(now_ms, Vec::new());
        }
        LlmStep::Work(calls)
    }

    /// The last `Send` passed its deadline: the run fails.
    pub fn handle_timeout(&mut self, now_ms: u64) -> LlmStep {
        if !matches!(self.phase, Phase::Model) {
            return self.out_of_order("handle_timeout");
        }
        self.model_span(now_ms, 0, None);
        let msg = format!(
            "LLM request to {} timed out after {}ms",
            self.url,
            crate::model::time::millis(self.cfg.timeout)
        );
        self.fail(Error::transport(msg))
    }

    /// The results of the last `CallTools`, in the same order as its list.
    pub fn handle_tool_results(&mut self, now_ms: u64, results: Vec<ToolResult>) -> LlmStep {
        let Phase::Tools(pending) = &self.phase else {
            return self.out_of_order("handle_tool_results");
        };
        let expected = pending.iter().filter(|p| p.rejected.is_none()).count();
        if results.len() != expected {
            let msg = format!(
                "handle_tool_results got {} results for {expected} tool calls",
                results.len()
            );
            return self.fail(Error::Misuse(msg));
        }
        let Phase::Tools(pending) = std::mem::replace(&mut self.phase, Phase::Model) else {
            return self.out_of_order("handle_tool_results");
        };
        // A suspension halts the run at the first suspended call, in call
        // order (SPEC §10: no waitFor here; the caller's answer resumes it).
        if let Some(request) = results.iter().find_map(pending_request) {
            let request = request.clone();
            self.text = request["prompt"].as_str().unwrap_or_default().to_string();
            self.pending = Some(request);
            return self.succeed();
        }
        let mut results = results.into_iter();
        let mut blocks = Vec::new();
        for p in pending {
            let result = match p.rejected {
                Some(text) => ToolResult::error(text),
                // The count was checked above, so there is one result per accepted call.
                None => results
                    .next()
                    .unwrap_or_else(|| ToolResult::error("the tool produced no result")),
            };
            match self.cfg.style {
                LlmStyle::OpenAi => self.messages.push(object([
                    ("role", "tool".into()),
                    ("tool_call_id", p.call.id.as_str().into()),
                    ("content", result.output.as_str().into()),
                ])),
                LlmStyle::Anthropic => {
                    let block = object([
                        ("type", "tool_result".into()),
                        ("tool_use_id", p.call.id.as_str().into()),
                        ("content", result.output.as_str().into()),
                    ]);
                    blocks.push(if result.is_error {
                        with(block, "is_error", true.into())
                    } else {
                        block
                    });
                }
            }
            self.records.push(ToolCallRecord {
                name: p.call.name,
                arguments: p.call.arguments,
                output: result.output,
                is_error: result.is_error,
            });
        }
        if self.cfg.style == LlmStyle::Anthropic {
            self.messages.push(object([
                ("role", "user".into()),
                ("content", Value::Array(blocks)),
            ]));
        }
        self.send_model(now_ms)
    }

    fn send_model(&mut self, now_ms: u64) -> LlmStep {
        self.turns += 1;
        self.sent_ms = now_ms;
        self.phase = Phase::Model;
        let deadline_ms = now_ms.saturating_add(crate::model::time::millis(self.cfg.timeout));
        LlmStep::Send {
            request: self.request(),
            deadline_ms,
        }
    }

    fn request(&self) -> HttpRequest {
        #[derive(Serialize)]
        struct OpenAiBody<'a> {
            model: &'a str,
            messages: &'a [Value],
            #[serde(skip_serializing_if = "<[Value]>::is_empty")]
            tools: &'a [Value],
        }
        #[derive(Serialize)]
        struct AnthropicBody<'a> {
            model: &'a str,
            max_tokens: u32,
            #[serde(skip_serializing_if = "Option::is_none")]
            system: Option<&'a str>,
            messages: &'a [Value],
            #[serde(skip_serializing_if = "<[Value]>::is_empty")]
            tools: &'a [Value],
        }
        let (model, messages, tools) = (
            self.cfg.model.as_str(),
            self.messages.as_slice(),
            self.tools.as_slice(),
        );
        // Serialising JSON values and strings cannot fail.
        let body = match self.cfg.style {
            LlmStyle::OpenAi => serde_json::to_vec(&OpenAiBody {
                model,
                messages,
                tools,
            }),
            LlmStyle::Anthropic => serde_json::to_vec(&AnthropicBody {
                model,
                max_tokens: self.cfg.max_tokens,
                system: self.cfg.system_prompt.as_deref().filter(|s| !s.is_empty()),
                messages,
                tools,
            }),
        }
        .unwrap_or_default();
        let mut headers = self.cfg.request_headers();
        if let Some(trace) = &self.cfg.trace {
            trace.nth_child(self.turns).put_on(&mut headers);
        }
        HttpRequest {
            method: "POST".into(),
            url: self.url.clone(),
            headers,
            body,
        }
    }

    fn succeed(&mut self) -> LlmStep {
        let tool_calls = std::mem::take(&mut self.records);
        let result = RunResult {
            text: std::mem::take(&mut self.text),
            tool_call_count: tool_calls.len(),
            tool_calls,
            turns: self.turns,
            usage: self.usage.clone(),
            model: self.model.clone().unwrap_or_else(|| self.cfg.model.clone()),
            pending: self.pending.take(),
        };
        self.finish(Ok(result))
    }

    fn fail(&mut self, e: Error) -> LlmStep {
        let e = self.cfg.redact_error(e);
        self.finish(Err(e))
    }

    fn finish(&mut self, result: Result<RunResult, Error>) -> LlmStep {
        self.phase = Phase::Finished(result.clone());
        LlmStep::Done(result)
    }

    fn out_of_order(&mut self, input: &str) -> LlmStep {
        let expected = match &self.phase {
            Phase::Finished(result) => return LlmStep::Done(result.clone()),
            Phase::Ready => "start",
            Phase::Model => "handle_response or handle_timeout",
            Phase::Tools(_) => "handle_tool_results",
        };
        self.fail(Error::Misuse(format!(
            "RunMachine::{input} called when {expected} was expected"
        )))
    }
}

/// A `Malformed` message: what is missing, and a snippet of the reply (or
/// the error the endpoint put in a 2xx reply).
fn malformed(url: &str, reply: &Value, what: &str) -> String {
    let error = reply.get("error");
    let error_text = error
        .and_then(|e| e.get("message"))
        .or(error)
        .and_then(Value::as_str);
    if let Some(message) = error_text {
        return format!("LLM reply from {url} is an error: {message}");
    }
    let reply = HttpResponse {
        body: crate::wire::json::text(reply).into_bytes(),
        ..Default::default()
    };
    format!(
        "LLM reply from {url} {what}: {}",
        reply.body_snippet(SNIPPET_CHARS)
    )
}

/// `message.content = text` (`message` is one this module built: an object).
/// Not `message["content"] = ..`: `IndexMut`'s panic quotes the key with `Debug`.
fn set_content(message: &mut Value, text: String) {
    if let Some(m) = message.as_object_mut() {
        m.insert("content".to_string(), text.into());
    }
}

fn count(usage: Option<&Value>, key: &str) -> Option<u64> {
    usage.and_then(|u| u.get(key)).and_then(Value::as_u64)
}

fn non_empty_str<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Tool-call arguments sent as JSON text: an object, or nothing (`""`, `null`) for `{}`.
fn parse_arguments(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(object([]));
    }
    match serde_json::from_slice::<Value>(text.as_bytes()) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(Value::Null) => Ok(object([])),
        Ok(_) => Err("the arguments are not a JSON object".into()),
        Err(e) => Err(format!("the arguments are not valid JSON ({e})")),
    }
}

fn rejection(name: &str, reason: &str) -> String {
    format!("Error: tool {name} was not called: {reason}. Call it again with a JSON object matching its input schema.")
}

/// Reads `choices[0].message` (`content`, `tool_calls`), `usage` and `model`.
fn parse_openai(reply: &Value, turn: u32) -> Result<Turn, String> {
    let message = reply
        .get("choices")
        .and_then(|c| c.get(0))
        .and_then(|c| c.get("message"))
        .filter(|m| m.is_object())
        .ok_or("has no choices[0].message")?;
    let text = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        // Some compatible servers send content parts instead of a string.
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            // A plain loop, not an iterator chain (see ARCHITECTURE.md).
            for p in parts {
                if let Some(t) = p.get("text").and_then(Value::as_str) {
                    text.push_str(t);
                }
            }
            text
        }
        _ => String::new(),
    };
    let listed = match message.get("tool_calls") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(list)) => list.as_slice(),
        Some(_) => return Err("has a tool_calls that is not an array".into()),
    };
    let mut calls = Vec::new();
    let mut echoed = Vec::new();
    for (i, tc) in listed.iter().enumerate() {
        let function = tc.get("function").unwrap_or(&Value::Null);
        let name = non_empty_str(function, "name")
            .ok_or_else(|| format!("has tool_calls[{i}] without a function.name"))?;
        let id = non_empty_str(tc, "id")
            .map(str::to_string)
            .unwrap_or_else(|| format!("call_{turn}_{i}"));
        // OpenAI sends a JSON string; some compatible servers send the object itself.
        let (arguments, raw, rejected) = match function.get("arguments") {
            None | Some(Value::Null) => (object([]), "{}".to_string(), None),
            Some(Value::String(s)) => match parse_arguments(s) {
                Ok(v) => (v, s.clone(), None),
                Err(reason) => (
                    Value::String(s.clone()),
                    s.clone(),
                    Some(rejection(name, &reason)),
                ),
            },
            Some(v @ Value::Object(_)) => (v.clone(), crate::wire::json::text(v), None),
            Some(v) => (
                v.clone(),
                crate::wire::json::text(v),
                Some(rejection(name, "the arguments are not a JSON object")),
            ),
        };
        echoed.push(object([
            ("id", id.as_str().into()),
            ("type", "function".into()),
            (
                "function",
                object([("name", name.into()), ("arguments", raw.into())]),
            ),
        ]));
        calls.push(PendingCall {
            call: ToolCall {
                id,
                name: name.to_string(),
                arguments,
                turn: 0,
            },
            rejected,
        });
    }
    let content = if text.is_empty() {
        Value::Null
    } else {
        Value::String(text.clone())
    };
    let assistant = object([
        ("role", "assistant".into()),
        ("content", content),
        ("tool_calls", Value::Array(echoed)),
    ]);
    let usage = reply.get("usage");
    let (prompt, completion) = (
        count(usage, "prompt_tokens").unwrap_or(0),
        count(usage, "completion_tokens").unwrap_or(0),
    );
    Ok(Turn {
        text,
        calls,
        assistant,
        usage: Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: count(usage, "total_tokens").unwrap_or(prompt.saturating_add(completion)),
        },
        model: non_empty_str(reply, "model").map(str::to_string),
    })
}

/// Reads the `content[]` blocks (`text`, `tool_use`), `usage` and `model`.
fn parse_anthropic(reply: &Value) -> Result<Turn, String> {
    let blocks = reply
        .get("content")
        .and_then(Value::as_array)
        .ok_or("has no content[] array")?;
    let mut text = String::new();
    let mut calls = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(
                block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            ),
            Some("tool_use") => {
                let id = non_empty_str(block, "id")
                    .ok_or_else(|| format!("has content[{i}] (tool_use) without an id"))?;
                let name = non_empty_str(block, "name")
                    .ok_or_else(|| format!("has content[{i}] (tool_use) without a name"))?;
                let (arguments, rejected) = match block.get("input") {
                    None | Some(Value::Null) => (object([]), None),
                    Some(v @ Value::Object(_)) => (v.clone(), None),
                    Some(v) => (
                        v.clone(),
                        Some(rejection(name, "the input is not a JSON object")),
                    ),
                };
                let call = ToolCall {
                    id: id.to_string(),
                    name: name.to_string(),
                    arguments,
                    turn: 0,
                };
                calls.push(PendingCall { call, rejected });
            }
            // Other blocks (thinking, …) are not read, but go back verbatim below.
            _ => {}
        }
    }
    let usage = reply.get("usage");
    let (prompt, completion) = (
        count(usage, "input_tokens").unwrap_or(0),
        count(usage, "output_tokens").unwrap_or(0),
    );
    Ok(Turn {
        text,
        calls,
        assistant: object([
            ("role", "assistant".into()),
            ("content", Value::Array(blocks.clone())),
        ]),
        usage: Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt.saturating_add(completion),
        },
        model: non_empty_str(reply, "model").map(str::to_string),
    })
}

/// Runs the LLM loop for `prompt` over `transport`: each model request is
/// raced against its deadline, and each turn's tool calls run concurrently
/// through `execute` (for a toolkit: `|c| toolkit.execute(&c.name, c.arguments)`).
///
/// Ends when a reply has no tool calls, or after `cfg.max_turns` model calls;
/// then `text` is the last reply's text, whatever it is, and that reply's tool
/// calls are not run.
pub async fn run<T: Transport, F, Fut>(
    transport: &T,
    cfg: &LlmConfig,
    prompt: String,
    tools: Vec<ToolSpec>,
    execute: F,
) -> Result<RunResult, Error>
where
    F: Fn(ToolCall) -> Fut,
    Fut: Future<Output = ToolResult>,
{
    run_conversation(transport, cfg, &[], prompt, tools, execute).await
}

/// [`run`] after the earlier turns of a conversation (see [`RunMachine::with_history`]).
pub async fn run_conversation<T: Transport, F, Fut>(
    transport: &T,
    cfg: &LlmConfig,
    history: &[Message],
    prompt: String,
    tools: Vec<ToolSpec>,
    execute: F,
) -> Result<RunResult, Error>
where
    F: Fn(ToolCall) -> Fut,
    Fut: Future<Output = ToolResult>,
{
    run_spanned(transport, cfg, history, prompt, tools, execute, None).await
}

/// [`run_conversation`] handing each model call's span to `spans` (when
/// the run is traced: [`LlmConfig::trace`]).
pub(crate) async fn run_spanned<T: Transport, F, Fut>(
    transport: &T,
    cfg: &LlmConfig,
    history: &[Message],
    prompt: String,
    tools: Vec<ToolSpec>,
    execute: F,
    spans: Option<crate::SpanHook>,
) -> Result<RunResult, Error>
where
    F: Fn(ToolCall) -> Fut,
    Fut: Future<Output = ToolResult>,
{
    let mut machine = RunMachine::with_history(cfg.clone(), history, prompt, tools);
    machine.spans = SpanSlot(spans);
    let work =
        |calls: Vec<ToolCall>| crate::host::driver::join_all(calls.into_iter().map(&execute));
    crate::host::driver::drive_with_work(
        &mut machine,
        transport,
        std::future::pending(),
        |_| {},
        work,
    )
    .await
}

/// The LLM loop on the one driver: [`RunMachine`]'s inputs are those of every
/// machine, and an abort fails the run.
impl Machine for RunMachine {
    type Output = Result<RunResult, Error>;
    type Event = std::convert::Infallible;
    type Work = Vec<ToolCall>;
    type Worked = Vec<ToolResult>;

    fn start(&mut self, now_ms: u64) -> LlmStep {
        RunMachine::start(self, now_ms)
    }
    fn handle_response(
        &mut self,
        now_ms: u64,
        response: Result<HttpResponse, TransportError>,
    ) -> LlmStep {
        RunMachine::handle_response(self, now_ms, response)
    }
    fn handle_head(
        &mut self,
        _now_ms: u64,
        _head: Result<ResponseHead, TransportError>,
    ) -> LlmStep {
        self.out_of_order("handle_head")
    }
    fn handle_body(
        &mut self,
        _now_ms: u64,
        _chunk: Result<Option<Vec<u8>>, TransportError>,
    ) -> LlmStep {
        self.out_of_order("handle_body")
    }
    fn handle_timeout(&mut self, now_ms: u64) -> LlmStep {
        RunMachine::handle_timeout(self, now_ms)
    }
    fn handle_abort(&mut self, _now_ms: u64) -> LlmStep {
        if let Phase::Finished(result) = &self.phase {
            return LlmStep::Done(result.clone());
        }
        let turns = self.turns;
        self.fail(Error::transport(format!(
            "the LLM run was aborted (model calls made: {turns})"
        )))
    }
    fn handle_work(&mut self, now_ms: u64, worked: Vec<ToolResult>) -> LlmStep {
        self.handle_tool_results(now_ms, worked)
    }
    fn poll_event(&mut self) -> Option<std::convert::Infallible> {
        None
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
