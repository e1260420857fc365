//! The outbound call as a state machine: SendMessage, then GetTask until the
//! task settles, mapped to a [`ToolResult`].
//!
//! Loop order, per the contract: check abort → check timeout → sleep → check
//! abort → GetTask. The interval between polls is a quarter of the time spent
//! so far, at least [`FIRST_POLL_DELAY_MS`] and at most `poll_every`: a task
//! is seen at most ~25% of its run time after it settles, and a long one costs
//! one request per `poll_every`.
//!
//! When the card lists [`crate::card::LONG_POLL_EXTENSION`], every GetTask
//! also asks `Prefer: wait=N` (RFC 7240). A peer that honours it holds the answer until the task settles or N seconds
//! pass and says `Preference-Applied`; the call then polls again at once, so
//! a settled task reaches the caller within a round trip. Other peers get the
//! interval above (and never see the header, which browsers would preflight).

use crate::driver::{Machine, Step};
use crate::error::{Error, TransportError};
use crate::http::HttpResponse;
use crate::rpc::{parse_reply, Dialect};
use crate::task::{SendResult, Task, TaskState};
use crate::tool::ToolResult;
use serde_json::json;

/// The first poll interval (capped by `poll_every`).
pub const FIRST_POLL_DELAY_MS: u64 = 25;
/// How long a best-effort CancelTask may take after an abort.
pub const CANCEL_GRACE_MS: u64 = 2_000;
/// Consecutive GetTask transport failures tolerated before giving up.
pub const MAX_POLL_FAILURES: u32 = 3;
/// The `Prefer: wait` asked of each GetTask, in seconds (capped by the time left).
pub const LONG_POLL_SECS: u64 = 10;

/// Everything one call needs, resolved: no defaults left to apply.
#[derive(Debug, Clone)]
pub struct CallSpec {
    /// The card's name, reported as `metadata.agent`.
    pub agent: String,
    pub endpoint: String,
    pub dialect: Dialect,
    /// Extra headers, already expanded.
    pub headers: Vec<(String, String)>,
    pub timeout_ms: u64,
    pub poll_every_ms: u64,
    pub message_id: String,
    pub text: String,
    /// Ask GetTask to long-poll (the card lists [`crate::card::LONG_POLL_EXTENSION`]).
    pub long_poll: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Sending,
    Waiting,
    Polling,
    Canceling,
}

/// One outbound call. Create it, then run it with [`crate::driver::drive`]
/// (or feed it inputs yourself).
#[derive(Debug)]
pub struct CallMachine {
    spec: CallSpec,
    dialect: Dialect,
    dialect_retried: bool,
    phase: Phase,
    started_ms: u64,
    deadline_ms: u64,
    rpc_id: u64,
    task_id: Option<String>,
    state: TaskState,
    polls: u32,
    poll_failures: u32,
}

impl CallMachine {
    pub fn new(spec: CallSpec) -> Self {
        CallMachine {
            dialect: spec.dialect,
            dialect_retried: false,
            phase: Phase::Sending,
            started_ms: 0,
            deadline_ms: 0,
            rpc_id: 0,
            task_id: None,
            state: TaskState::Unknown,
            polls: 0,
            poll_failures: 0,
            spec,
        }
    }

    /// The dialect in use (it changes once if the peer asks for the other one).
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    fn next_rpc_id(&mut self) -> u64 {
        self.rpc_id += 1;
        self.rpc_id
    }

    fn with_headers(&self, mut req: crate::HttpRequest) -> crate::HttpRequest {
        req.headers.extend(self.spec.headers.iter().cloned());
        req
    }

    fn send_message(&mut self) -> Step<ToolResult> {
        let id = self.next_rpc_id();
        let req = self.dialect.send_message(
            &self.spec.endpoint,
            id,
            &self.spec.message_id,
            &self.spec.text,
        );
        Step::Send {
            request: self.with_headers(req),
            deadline_ms: self.deadline_ms,
        }
    }

    fn task_label(&self) -> String {
        self.task_id
            .clone()
            .unwrap_or_else(|| "(not created)".into())
    }

    fn finish(&self, now_ms: u64, is_error: bool, output: String) -> Step<ToolResult> {
        Step::Done(ToolResult {
            output,
            is_error,
            metadata: Some(json!({
                "agent": self.spec.agent,
                "taskId": self.task_id,
                "state": self.state.as_str(),
                "polls": self.polls,
                "ms": now_ms.saturating_sub(self.started_ms),
            })),
        })
    }

    fn fail(&self, now_ms: u64, what: &str, err: &Error) -> Step<ToolResult> {
        self.finish(now_ms, true, format!("A2A {what} failed: {err}"))
    }

    fn timed_out(&self, now_ms: u64) -> Step<ToolResult> {
        let output = format!(
            "A2A task {} timed out after {}ms (state={})",
            self.task_label(),
            self.spec.timeout_ms,
            self.state.as_str()
        );
        self.finish(now_ms, true, output)
    }

    fn canceled(&mut self, now_ms: u64) -> Step<ToolResult> {
        self.state = TaskState::Canceled;
        let output = format!("A2A task {} canceled", self.task_label());
        self.finish(now_ms, true, output)
    }

    /// A task arrived (from SendMessage or GetTask): finish or wait for the next poll.
    fn on_task(&mut self, now_ms: u64, task: Task) -> Step<ToolResult> {
        self.task_id = Some(task.id.clone());
        self.state = task.state;
        let id = &task.id;
        let state = task.state.as_str();
        match task.state {
            TaskState::Completed => self.finish(now_ms, false, task.output_text()),
            TaskState::Failed | TaskState::Canceled | TaskState::Rejected => {
                let output = match task.status_text() {
                    Some(text) => format!("A2A task {id} {state}: {text}"),
                    None => format!("A2A task {id} {state}"),
                };
                self.finish(now_ms, true, output)
            }
            // The agent waits for the caller: polling on would only burn the timeout.
            TaskState::InputRequired | TaskState::AuthRequired => {
                let question = task.status_text().or_else(|| {
                    task.history
                        .iter()
                        .rev()
                        .find(|m| m.role == crate::task::Role::Agent)
                        .map(|m| m.text())
                });
                let output = match question {
                    Some(q) => format!("A2A task {id} {state}: {q}"),
                    None => format!("A2A task {id} {state}"),
                };
                self.finish(now_ms, true, output)
            }
            TaskState::Submitted | TaskState::Working | TaskState::Unknown => self.wait(now_ms),
        }
    }

    fn wait(&mut self, now_ms: u64) -> Step<ToolResult> {
        // A peer that long-polls holds the first GetTask itself: ask at once.
        if self.spec.long_poll && self.polls == 0 {
            return self.wait_for(now_ms, 0);
        }
        let elapsed = now_ms.saturating_sub(self.started_ms);
        let delay = (elapsed / 4)
            .max(FIRST_POLL_DELAY_MS)
            .min(self.spec.poll_every_ms);
        self.wait_for(now_ms, delay)
    }

    fn wait_for(&mut self, now_ms: u64, delay_ms: u64) -> Step<ToolResult> {
        if now_ms >= self.deadline_ms {
            return self.timed_out(now_ms);
        }
        self.phase = Phase::Waiting;
        Step::Sleep {
            until_ms: (now_ms + delay_ms).min(self.deadline_ms),
        }
    }
}

impl Machine for CallMachine {
    type Output = ToolResult;

    fn start(&mut self, now_ms: u64) -> Step<ToolResult> {
        self.started_ms = now_ms;
        self.deadline_ms = now_ms.saturating_add(self.spec.timeout_ms);
        self.phase = Phase::Sending;
        self.send_message()
    }

    fn handle_response(
        &mut self,
        now_ms: u64,
        response: Result<HttpResponse, TransportError>,
    ) -> Step<ToolResult> {
        let endpoint = self.spec.endpoint.clone();
        match self.phase {
            Phase::Sending => {
                let what = format!("SendMessage to {endpoint}");
                let result = match response {
                    Err(e) => return self.fail(now_ms, &what, &e.into()),
                    Ok(resp) => parse_reply(&resp, &endpoint),
                };
                match result {
                    Err(Error::Rpc { code, .. })
                        if !self.dialect_retried && self.dialect.fallback(code).is_some() =>
                    {
                        self.dialect_retried = true;
                        self.dialect = self.dialect.fallback(code).unwrap_or(self.dialect);
                        self.send_message()
                    }
                    Err(e) => self.fail(now_ms, &what, &e),
                    Ok(v) => match SendResult::from_value(&v) {
                        Some(SendResult::Task(task)) => self.on_task(now_ms, task),
                        Some(SendResult::Message(m)) => {
                            // The agent answered directly, without a task.
                            self.state = TaskState::Completed;
                            self.finish(now_ms, false, m.text())
                        }
                        None => {
                            let err = Error::Malformed(format!(
                                "the reply is neither a task nor a message: {v}"
                            ));
                            self.fail(now_ms, &what, &err)
                        }
                    },
                }
            }
            Phase::Polling => {
                let what = format!("GetTask {}", self.task_label());
                match response {
                    Err(e) => {
                        // A dropped connection mid-task is often transient; the task is
                        // still running remotely, so try again on the normal schedule.
                        self.poll_failures += 1;
                        if self.poll_failures >= MAX_POLL_FAILURES {
                            return self.fail(now_ms, &what, &e.into());
                        }
                        self.wait(now_ms)
                    }
                    Ok(resp) => {
                        self.poll_failures = 0;
                        let long_polled = resp
                            .header("Preference-Applied")
                            .is_some_and(|p| p.contains("wait"));
                        match parse_reply(&resp, &endpoint) {
                            Err(e) => self.fail(now_ms, &what, &e),
                            Ok(v) => {
                                // 1.0 peers may wrap the task; accept both.
                                let task = Task::from_value(v.get("task").unwrap_or(&v));
                                match task {
                                    // The peer already waited for us: ask again at once.
                                    Some(task)
                                        if long_polled
                                            && !task.state.is_terminal()
                                            && !task.state.is_interrupted() =>
                                    {
                                        self.task_id = Some(task.id.clone());
                                        self.state = task.state;
                                        self.wait_for(now_ms, 0)
                                    }
                                    Some(task) => self.on_task(now_ms, task),
                                    None => {
                                        let err = Error::Malformed(format!(
                                            "the reply is not a task: {v}"
                                        ));
                                        self.fail(now_ms, &what, &err)
                                    }
                                }
                            }
                        }
                    }
                }
            }
            Phase::Canceling => self.canceled(now_ms),
            // No request is in flight while waiting; a stray response changes nothing.
            Phase::Waiting => self.wait(now_ms),
        }
    }

    fn handle_timeout(&mut self, now_ms: u64) -> Step<ToolResult> {
        match self.phase {
            Phase::Canceling => self.canceled(now_ms),
            _ if now_ms >= self.deadline_ms => self.timed_out(now_ms),
            Phase::Waiting => {
                self.phase = Phase::Polling;
                self.polls += 1;
                let id = self.next_rpc_id();
                let task_id = self.task_id.clone().unwrap_or_default();
                let mut req = self.dialect.get_task(&self.spec.endpoint, id, &task_id);
                let wait = LONG_POLL_SECS.min(self.deadline_ms.saturating_sub(now_ms) / 1000);
                if self.spec.long_poll && wait > 0 {
                    req = req.with_header("Prefer", format!("wait={wait}"));
                }
                Step::Send {
                    request: self.with_headers(req),
                    deadline_ms: self.deadline_ms,
                }
            }
            // A request's deadline is the call's deadline, handled above.
            Phase::Sending | Phase::Polling => self.timed_out(now_ms),
        }
    }

    fn handle_abort(&mut self, now_ms: u64) -> Step<ToolResult> {
        match (&self.task_id, self.phase) {
            (Some(task_id), Phase::Waiting | Phase::Polling) => {
                // Best effort: tell the peer, but never wait long for it.
                let task_id = task_id.clone();
                self.phase = Phase::Canceling;
                let id = self.next_rpc_id();
                let req = self.dialect.cancel_task(&self.spec.endpoint, id, &task_id);
                Step::Send {
                    request: self.with_headers(req),
                    deadline_ms: now_ms + CANCEL_GRACE_MS,
                }
            }
            _ => self.canceled(now_ms),
        }
    }
}

#[cfg(test)]
#[path = "call_tests.rs"]
mod tests;
