//! The A2A server as one function: an [`HttpRequest`] in, an
//! [`HttpResponse`] out, with fulfilment handed to the host's spawner.
//!
//! Every host (the native tokio server, an edge worker's `fetch`, tests)
//! calls [`A2aServer::handle`]; none re-implements routing.

mod card;
mod fulfil;
mod rpc;
mod store;

pub use card::{build_agent_card, A2aConfig, Provider, DEFAULT_NAME, DEFAULT_VERSION};
pub use fulfil::{EchoFulfiller, LlmFulfiller};
pub use store::{MemoryStore, StoreError, TaskStore, DEFAULT_MAX_TASKS};

use crate::http::{HttpRequest, HttpResponse};
use crate::task::{Artifact, Message, Role, Shape, Task, TaskState};
use crate::transport::{BoxFuture, MaybeSend, MaybeSync};
use futures_util::future::{AbortHandle, Abortable};
use rpc::{RpcError, RpcRequest};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The card path.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";
/// The largest request body hosts accept by default (1 MiB); see [`payload_too_large`].
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
/// The `Access-Control-Allow-Origin` hosts serve when none is configured.
pub const DEFAULT_CORS_ORIGIN: &str = "*";

/// The answer to a request whose body is over `limit` bytes: 413, and the
/// connection closed (the rest of the body is not read). Hosts check the
/// size while reading, before calling [`A2aServer::handle`].
pub fn payload_too_large(limit: usize) -> HttpResponse {
    HttpResponse {
        status: 413,
        headers: vec![
            ("Content-Type".into(), "text/plain; charset=utf-8".into()),
            ("Connection".into(), "close".into()),
        ],
        body: format!("request body over the {limit}-byte limit\n").into_bytes(),
    }
}
/// The card path of older A2A drafts, served too.
pub const LEGACY_CARD_PATH: &str = "/.well-known/agent.json";

/// What a task asks the agent to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FulfilRequest {
    pub task_id: String,
    pub context_id: String,
    /// The message's text parts joined by `"\n"`.
    pub text: String,
    /// The skill named in the message's `metadata.skill`, if any.
    pub skill: Option<String>,
}

/// Does the work of a task: `Ok(answer text)` completes it, `Err(reason)` fails it.
pub trait Fulfiller: MaybeSend + MaybeSync + 'static {
    fn fulfil(&self, request: FulfilRequest) -> BoxFuture<'static, Result<String, String>>;
}

/// A task reached a terminal state (the `onTask` hook).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TaskEvent {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
    /// The task's text.
    pub task: String,
    /// The answer (completed) or the error text (failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    pub state: String,
}

/// What the server needs from its host.
pub trait ServerHost: MaybeSend + MaybeSync + 'static {
    /// A fresh unique id.
    fn new_id(&self) -> String;
    /// Runs `job` to completion in the background (tokio::spawn, ctx.waitUntil, …).
    fn spawn(&self, job: BoxFuture<'static, ()>);
    /// Called once per task on its terminal state.
    fn on_task(&self, _event: TaskEvent) {}
    /// Reports a problem no caller will see (a save that failed during fulfilment).
    fn report(&self, _problem: &str) {}
    /// A timer, for GetTask long-polls (`Prefer: wait=N`). Hosts without one
    /// keep the default, and GetTask then always answers at once.
    fn sleep(&self, _ms: u64) -> Option<BoxFuture<'static, ()>> {
        None
    }
}

/// The longest `Prefer: wait` honoured, in seconds.
pub const MAX_WAIT_SECS: u64 = 30;

/// The seconds of an RFC 7240 `Prefer: wait=N` header, capped at [`MAX_WAIT_SECS`].
fn preferred_wait(req: &HttpRequest) -> Option<u64> {
    let prefer = req.header("Prefer")?;
    prefer
        .split([',', ';'])
        .filter_map(|p| p.trim().strip_prefix("wait="))
        .find_map(|n| n.trim().parse::<u64>().ok())
        .map(|n| n.min(MAX_WAIT_SECS))
}

/// How the server answers browsers and what it advertises.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The served card (see [`build_agent_card`]). `None`: no A2A profile,
    /// every route is 404.
    pub card: Option<Value>,
    /// `Access-Control-Allow-Origin`; `None` sends no CORS headers.
    pub cors_origin: Option<String>,
}

struct Running {
    abort: AbortHandle,
    skill: Option<String>,
    text: String,
}

/// The A2A server. Keep it in an `Arc`; every request goes to [`A2aServer::handle`].
pub struct A2aServer<S: TaskStore, H: ServerHost, F: Fulfiller> {
    store: S,
    host: H,
    fulfiller: F,
    card_json: Option<Vec<u8>>,
    cors_origin: Option<String>,
    running: Mutex<HashMap<String, Running>>,
    waiters: Mutex<HashMap<String, Vec<futures_channel::oneshot::Sender<Task>>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The maps stay consistent across a panic elsewhere; keep serving.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    pub fn new(options: ServerOptions, store: S, host: H, fulfiller: F) -> Arc<Self> {
        Arc::new(A2aServer {
            store,
            host,
            fulfiller,
            card_json: options.card.map(|c| c.to_string().into_bytes()),
            cors_origin: options.cors_origin,
            running: Mutex::new(HashMap::new()),
            waiters: Mutex::new(HashMap::new()),
        })
    }

    /// The task store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Answers one HTTP request.
    pub async fn handle(self: &Arc<Self>, req: HttpRequest) -> HttpResponse {
        let mut resp = self.route(req).await;
        if let Some(origin) = &self.cors_origin {
            resp.headers
                .push(("Access-Control-Allow-Origin".into(), origin.clone()));
            resp.headers.push((
                "Access-Control-Expose-Headers".into(),
                "Preference-Applied".into(),
            ));
            if origin != "*" {
                resp.headers.push(("Vary".into(), "Origin".into()));
            }
        }
        resp
    }

    async fn route(self: &Arc<Self>, req: HttpRequest) -> HttpResponse {
        let Some(card) = &self.card_json else {
            return plain(404, "not found");
        };
        // Accept absolute URLs too; match on the path alone.
        let path = match crate::url::origin(&req.url) {
            Some(o) => &req.url[o.len()..],
            None => req.url.as_str(),
        };
        let path = path
            .split(['?', '#'])
            .next()
            .filter(|p| !p.is_empty())
            .unwrap_or("/");
        match (req.method.as_str(), path) {
            ("OPTIONS", _) if self.cors_origin.is_some() => HttpResponse {
                status: 204,
                headers: vec![
                    (
                        "Access-Control-Allow-Methods".into(),
                        "GET, POST, OPTIONS".into(),
                    ),
                    (
                        "Access-Control-Allow-Headers".into(),
                        req.header("Access-Control-Request-Headers")
                            .unwrap_or("Content-Type, A2A-Version, Authorization")
                            .into(),
                    ),
                    ("Access-Control-Max-Age".into(), "86400".into()),
                ],
                body: Vec::new(),
            },
            ("GET" | "HEAD", CARD_PATH | LEGACY_CARD_PATH) => HttpResponse::json(200, card.clone()),
            ("POST", "/") => self.json_rpc(&req).await,
            (_, "/" | CARD_PATH | LEGACY_CARD_PATH) => {
                let mut r = plain(405, "method not allowed");
                r.headers.push((
                    "Allow".into(),
                    if path == "/" { "POST" } else { "GET" }.into(),
                ));
                r
            }
            _ => plain(404, "not found"),
        }
    }

    async fn json_rpc(self: &Arc<Self>, req: &HttpRequest) -> HttpResponse {
        let mut waited = None;
        let (id, outcome) = match RpcRequest::parse(req) {
            Ok(call) => {
                let id = call.id.clone();
                let is_get = matches!(call.method.as_str(), "GetTask" | "tasks/get");
                let wait = preferred_wait(req).filter(|_| is_get);
                // Hosts without a timer answer at once, as if no wait was asked.
                let timer = wait.and_then(|secs| Some((secs, self.host.sleep(secs * 1000)?)));
                let outcome = match timer {
                    Some((secs, timer)) => {
                        waited = Some(secs);
                        self.get_task_waiting(&call, timer).await
                    }
                    None => self.dispatch(call).await,
                };
                (id, outcome)
            }
            Err((id, err)) => (id, Err(err)),
        };
        let body = match &outcome {
            Ok(result) => serde_json::to_vec(&Envelope {
                jsonrpc: "2.0",
                id: &id,
                result: Some(result),
                error: None,
            }),
            Err(e) => serde_json::to_vec(&Envelope {
                jsonrpc: "2.0",
                id: &id,
                result: None,
                error: Some(ErrorBody {
                    code: e.code,
                    message: &e.message,
                }),
            }),
        };
        // Serialising plain data into memory cannot fail; keep a valid answer anyway.
        let body = body.unwrap_or_else(|_| {
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}"#
                .to_vec()
        });
        let mut resp = HttpResponse::json(200, body);
        if let Some(secs) = waited {
            resp.headers
                .push(("Preference-Applied".into(), format!("wait={secs}")));
        }
        resp
    }

    /// GetTask that holds the answer until `timer` ends while the task is
    /// still running, so a caller sees it settle at once instead of at its next poll.
    async fn get_task_waiting(
        self: &Arc<Self>,
        call: &RpcRequest,
        timer: BoxFuture<'static, ()>,
    ) -> Result<Answer, RpcError> {
        let id = call
            .params
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        // Watch before reading, so a task settling in between is not missed.
        let settled = self.watch(&id);
        let task = match self.existing(&call.params).await {
            Ok(t) => t,
            Err(e) => {
                drop(settled);
                self.unwatch(&id);
                return Err(e);
            }
        };
        let task = if task.state.is_terminal() || task.state.is_interrupted() {
            task
        } else {
            match futures_util::future::select(settled, timer).await {
                futures_util::future::Either::Left((Ok(t), _)) => {
                    return Ok(Answer::task(t, call.shape, history_length(&call.params)))
                }
                _ => self.existing(&call.params).await?,
            }
        };
        self.unwatch(&id);
        Ok(Answer::task(task, call.shape, history_length(&call.params)))
    }

    /// Drops the waiters of `task_id` whose receivers are gone.
    fn unwatch(&self, task_id: &str) {
        let mut waiters = lock(&self.waiters);
        if let Some(list) = waiters.get_mut(task_id) {
            list.retain(|tx| !tx.is_canceled());
            if list.is_empty() {
                waiters.remove(task_id);
            }
        }
    }

    async fn dispatch(self: &Arc<Self>, call: RpcRequest) -> Result<Answer, RpcError> {
        let shape = call.shape;
        match call.method.as_str() {
            "SendMessage" | "message/send" => self.send_message(&call.params, shape).await,
            "GetTask" | "tasks/get" => {
                let task = self.existing(&call.params).await?;
                Ok(Answer::task(task, shape, history_length(&call.params)))
            }
            "CancelTask" | "tasks/cancel" => self.cancel(&call.params, shape).await,
            "SendStreamingMessage" | "message/stream" | "SubscribeToTask" | "tasks/resubscribe" => {
                Err(RpcError::new(
                    rpc::UNSUPPORTED_OPERATION,
                    "streaming is not supported by this agent",
                ))
            }
            other => Err(RpcError::new(
                rpc::METHOD_NOT_FOUND,
                format!("Method not found: {other}"),
            )),
        }
    }

    async fn existing(&self, params: &Value) -> Result<Task, RpcError> {
        let id = params
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("params.id must be a string"))?;
        match self.store.get(id).await {
            Ok(Some(task)) => Ok(task),
            Ok(None) => Err(RpcError::new(
                rpc::TASK_NOT_FOUND,
                format!("Task not found: {id}"),
            )),
            Err(e) => Err(RpcError::internal(format!("the task store failed: {e}"))),
        }
    }

    async fn send_message(
        self: &Arc<Self>,
        params: &Value,
        shape: Shape,
    ) -> Result<Answer, RpcError> {
        let msg = params
            .get("message")
            .filter(|m| m.is_object())
            .ok_or_else(|| RpcError::invalid_params("params.message must be an object"))?;
        if msg.get("parts").is_some_and(|p| !p.is_array()) {
            return Err(RpcError::invalid_params(
                "params.message.parts must be an array",
            ));
        }
        let mut user = Message::from_value(msg)
            .unwrap_or_else(|| Message::agent_text(String::new(), String::new()));
        user.role = Role::User;
        if user.parts.is_empty() {
            return Err(RpcError::invalid_params("the message has no text part"));
        }
        let config = params.get("configuration");
        let flag = |k: &str| config.and_then(|c| c.get(k)).and_then(Value::as_bool);
        // 1.0 blocks unless returnImmediately; 0.3 blocks unless blocking:false.
        let blocking =
            !(flag("returnImmediately") == Some(true) || flag("blocking") == Some(false));
        let skill = msg
            .get("metadata")
            .and_then(|m| m.get("skill"))
            .and_then(Value::as_str)
            .map(str::to_string);

        let task_id = self.host.new_id();
        let context_id = user
            .context_id
            .clone()
            .unwrap_or_else(|| self.host.new_id());
        if user.message_id.is_empty() {
            user.message_id = self.host.new_id();
        }
        // Stored without ids of its own: on the wire it carries the task's.
        user.context_id = None;
        user.task_id = None;
        let text = user.text();
        let task = Task {
            id: task_id.clone(),
            context_id: context_id.clone(),
            state: TaskState::Submitted,
            status_message: None,
            artifacts: Vec::new(),
            history: vec![user],
        };
        self.store
            .save(&task)
            .await
            .map_err(|e| RpcError::internal(format!("the task could not be stored: {e}")))?;

        let settled = blocking.then(|| self.watch(&task_id));
        let request = FulfilRequest {
            task_id,
            context_id,
            text,
            skill,
        };
        self.start(request);
        let task = match settled {
            Some(rx) => match rx.await {
                Ok(settled) => settled,
                // Released without settling (the job died): answer what is stored now.
                Err(_) => self
                    .store
                    .get(&task.id)
                    .await
                    .ok()
                    .flatten()
                    .unwrap_or(task),
            },
            None => task,
        };
        // 1.0 wraps a SendMessage result: `{"task": …}`; 0.3 answers the bare task.
        Ok(Answer {
            wrap: shape == Shape::V10,
            ..Answer::task(task, shape, None)
        })
    }

    /// A receiver that gets the task once it settles.
    fn watch(&self, task_id: &str) -> futures_channel::oneshot::Receiver<Task> {
        let (tx, rx) = futures_channel::oneshot::channel();
        lock(&self.waiters)
            .entry(task_id.to_string())
            .or_default()
            .push(tx);
        rx
    }

    fn start(self: &Arc<Self>, request: FulfilRequest) {
        let (abort, registration) = AbortHandle::new_pair();
        lock(&self.running).insert(
            request.task_id.clone(),
            Running {
                abort,
                skill: request.skill.clone(),
                text: request.text.clone(),
            },
        );
        let server = self.clone();
        let job = async move {
            // However the job ends (settled, aborted by a cancel, an early
            // return, a panic), nobody is left waiting on it.
            let mut release = ReleaseWaiters {
                server: server.clone(),
                id: request.task_id.clone(),
                finished: false,
            };
            let work = server.clone().fulfil(request);
            // Aborted means canceled: `cancel` has already saved and announced it.
            let _ = Abortable::new(work, registration).await;
            release.finished = true;
        };
        self.host.spawn(Box::pin(job));
    }

    async fn fulfil(self: Arc<Self>, request: FulfilRequest) {
        let id = request.task_id.clone();
        let Some(mut task) = self.load_for_update(&id).await else {
            return;
        };
        task.state = TaskState::Working;
        self.save_quietly(&task).await;

        let outcome = self.fulfiller.fulfil(request.clone()).await;
        // A cancel that raced the answer wins: it already removed us.
        let still_running = lock(&self.running).remove(&id).is_some();
        if !still_running {
            return;
        }
        let result = match outcome {
            Ok(text) => {
                task.state = TaskState::Completed;
                task.artifacts = vec![Artifact {
                    artifact_id: self.host.new_id(),
                    parts: vec![text.clone()],
                }];
                text
            }
            Err(error) => {
                task.state = TaskState::Failed;
                // Its contextId and taskId come from the task on the wire.
                task.status_message = Some(Message::agent_text(self.host.new_id(), error.clone()));
                error
            }
        };
        self.settle(task, request.skill, request.text, Some(result))
            .await;
    }

    /// Fails a task that is not finished yet, with `reason` as its message.
    async fn fail_if_unfinished(&self, id: &str, reason: &str) {
        let Some(mut task) = self.load_for_update(id).await else {
            return;
        };
        if task.state.is_terminal() {
            return;
        }
        task.state = TaskState::Failed;
        task.status_message = Some(Message::agent_text(self.host.new_id(), reason.to_string()));
        let text = task.history.first().map(Message::text).unwrap_or_default();
        self.settle(task, None, text, Some(reason.to_string()))
            .await;
    }

    async fn load_for_update(&self, id: &str) -> Option<Task> {
        match self.store.get(id).await {
            Ok(Some(t)) => Some(t),
            Ok(None) => {
                self.host
                    .report(&format!("task {id} vanished from the store before it ran"));
                None
            }
            Err(e) => {
                self.host
                    .report(&format!("task {id}: the store failed: {e}"));
                None
            }
        }
    }

    async fn save_quietly(&self, task: &Task) {
        if let Err(e) = self.store.save(task).await {
            self.host.report(&format!(
                "task {}: saving state {} failed: {e}",
                task.id,
                task.state.as_str()
            ));
        }
    }

    /// Saves a terminal task, wakes blocking callers, runs the hook.
    async fn settle(
        &self,
        task: Task,
        skill: Option<String>,
        text: String,
        result: Option<String>,
    ) {
        self.save_quietly(&task).await;
        for tx in lock(&self.waiters).remove(&task.id).unwrap_or_default() {
            let _ = tx.send(task.clone());
        }
        self.host.on_task(TaskEvent {
            id: task.id.clone(),
            skill,
            task: text,
            result,
            state: task.state.as_str().to_string(),
        });
    }

    async fn cancel(self: &Arc<Self>, params: &Value, shape: Shape) -> Result<Answer, RpcError> {
        let mut task = self.existing(params).await?;
        if task.state.is_terminal() {
            return Err(RpcError::new(
                rpc::TASK_NOT_CANCELABLE,
                format!(
                    "Task cannot be canceled: {} is {}",
                    task.id,
                    task.state.as_str()
                ),
            ));
        }
        let running = lock(&self.running).remove(&task.id);
        let (skill, text) = match running {
            Some(r) => {
                r.abort.abort();
                (r.skill, r.text)
            }
            None => (
                None,
                task.history.first().map(Message::text).unwrap_or_default(),
            ),
        };
        task.state = TaskState::Canceled;
        self.settle(task.clone(), skill, text, None).await;
        Ok(Answer::task(task, shape, None))
    }
}

/// Dropped when a fulfilment job ends: forgets the job and drops the
/// senders of anyone still waiting on its task, so a blocking SendMessage
/// answers with the task as last stored instead of hanging.
struct ReleaseWaiters<S: TaskStore, H: ServerHost, F: Fulfiller> {
    server: Arc<A2aServer<S, H, F>>,
    id: String,
    /// The job ran to its end (settled, canceled, or gave up on a store error).
    finished: bool,
}

/// The status text of a task whose fulfilment panicked.
pub const CRASHED: &str = "the agent failed unexpectedly while working on this task";

impl<S: TaskStore, H: ServerHost, F: Fulfiller> Drop for ReleaseWaiters<S, H, F> {
    fn drop(&mut self) {
        lock(&self.server.running).remove(&self.id);
        lock(&self.server.waiters).remove(&self.id);
        // Unwinding from a panic in the fulfiller: fail the task rather than
        // leave it `working` forever.
        if !self.finished && std::thread::panicking() {
            let (server, id) = (self.server.clone(), self.id.clone());
            self.server.host.spawn(Box::pin(async move {
                server.fail_if_unfinished(&id, CRASHED).await
            }));
        }
    }
}

fn history_length(params: &Value) -> Option<usize> {
    params
        .get("historyLength")
        .and_then(Value::as_u64)
        .map(|n| n as usize)
}

/// A JSON-RPC result (always a task here), serialised straight to bytes.
struct Answer {
    task: Task,
    shape: Shape,
    history_length: Option<usize>,
    /// 1.0 SendMessage results are `{"task": …}`.
    wrap: bool,
}

impl Answer {
    fn task(task: Task, shape: Shape, history_length: Option<usize>) -> Answer {
        Answer {
            task,
            shape,
            history_length,
            wrap: false,
        }
    }
}

impl serde::Serialize for Answer {
    fn serialize<Ser: serde::Serializer>(&self, s: Ser) -> Result<Ser::Ok, Ser::Error> {
        use serde::ser::SerializeMap;
        let shaped = self.task.shaped(self.shape, self.history_length);
        if self.wrap {
            let mut map = s.serialize_map(Some(1))?;
            map.serialize_entry("task", &shaped)?;
            map.end()
        } else {
            serde::Serialize::serialize(&shaped, s)
        }
    }
}

#[derive(serde::Serialize)]
struct ErrorBody<'a> {
    code: i64,
    message: &'a str,
}

#[derive(serde::Serialize)]
struct Envelope<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Answer>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorBody<'a>>,
}

fn plain(status: u16, text: &str) -> HttpResponse {
    HttpResponse {
        status,
        headers: vec![("Content-Type".into(), "text/plain; charset=utf-8".into())],
        body: format!("{text}\n").into_bytes(),
    }
}

#[cfg(test)]
mod tests;
