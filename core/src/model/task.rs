//! The A2A Task and Message, read leniently from any of the three wire
//! shapes and written in the 0.3 or the 1.0 shape.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::Value;

pub use crate::model::part::Part;
use crate::model::part::{read_parts, Parts};

/// The lifecycle state of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    AuthRequired,
    Completed,
    Failed,
    Canceled,
    Rejected,
    /// A state this library does not know (kept so a peer's novelty never fails a call).
    Unknown,
}

/// Written in the 0.3 spelling (`input-required`).
impl Serialize for TaskState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl std::fmt::Display for TaskState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which wire shape to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A2A 0.3 and the toolnexus dialect: `kind` fields, `completed`, `agent`.
    V03,
    /// A2A 1.0: `TASK_STATE_COMPLETED`, `ROLE_AGENT`, parts without `kind`.
    V10,
}

impl TaskState {
    /// Reads `completed`, `TASK_STATE_COMPLETED`, `input-required`,
    /// `TASK_STATE_INPUT_REQUIRED`, `cancelled`, … ; anything else is `Unknown`.
    pub fn parse(s: &str) -> TaskState {
        let s = s.strip_prefix("TASK_STATE_").unwrap_or(s);
        match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "submitted" => TaskState::Submitted,
            "working" => TaskState::Working,
            "input-required" => TaskState::InputRequired,
            "auth-required" => TaskState::AuthRequired,
            "completed" => TaskState::Completed,
            "failed" => TaskState::Failed,
            "canceled" | "cancelled" => TaskState::Canceled,
            "rejected" => TaskState::Rejected,
            _ => TaskState::Unknown,
        }
    }

    /// The 0.3 / toolnexus spelling (`input-required`).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Submitted => "submitted",
            TaskState::Working => "working",
            TaskState::InputRequired => "input-required",
            TaskState::AuthRequired => "auth-required",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Canceled => "canceled",
            TaskState::Rejected => "rejected",
            TaskState::Unknown => "unknown",
        }
    }

    /// The 1.0 spelling (`TASK_STATE_INPUT_REQUIRED`).
    pub fn as_v10(self) -> &'static str {
        match self {
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::Rejected => "TASK_STATE_REJECTED",
            TaskState::Unknown => "TASK_STATE_UNSPECIFIED",
        }
    }

    /// Completed, failed, canceled or rejected: the task will not change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// Input- or auth-required: the agent waits for the caller.
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }

    /// Submitted or working: the agent is still on it (a fulfilment should be
    /// running somewhere).
    pub fn is_active(self) -> bool {
        matches!(self, TaskState::Submitted | TaskState::Working)
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Agent,
}

impl Role {
    fn parse(s: &str) -> Role {
        let s = s.strip_prefix("ROLE_").unwrap_or(s);
        if s.eq_ignore_ascii_case("agent") {
            Role::Agent
        } else {
            Role::User
        }
    }
}

/// A message: its text, file and data parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    pub message_id: String,
    pub parts: Vec<Part>,
    pub context_id: Option<String>,
    pub task_id: Option<String>,
}

/// An artifact: its text, file and data parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    pub artifact_id: String,
    pub parts: Vec<Part>,
}

/// A task as the client sees it and the server stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub id: String,
    pub context_id: String,
    pub state: TaskState,
    pub status_message: Option<Message>,
    /// When the status last changed (`status.timestamp`), in Unix ms.
    pub updated_ms: Option<u64>,
    pub artifacts: Vec<Artifact>,
    pub history: Vec<Message>,
    /// The wire shape of the request that made it: calls about it that
    /// name no `A2A-Version` are answered in it, and stores write it so.
    /// Read back from a task's state spelling (`TASK_STATE_…` ⇒ 1.0).
    pub dialect: Shape,
    /// Who made it ([`Principal::owner`](crate::server::auth::Principal::owner)
    /// of its first caller), when the server authenticates callers: only
    /// they see it. Never on the wire: stores keep it through
    /// [`Task::stored`] / [`Task::from_stored`]; [`Task::from_value`] (peer
    /// data) never reads one.
    pub owner: Option<String>,
    /// The trace the task's work belongs to (W3C Trace Context: its
    /// `traceparent` names the task's span), when the request that made or
    /// continued it carried one. Never on the wire, like `owner`: stored
    /// with the task so later work (follow-ups, push deliveries) stays in it.
    /// Boxed: most tasks have none, and every task pays for the field.
    pub trace: Option<Box<crate::TraceContext>>,
    /// How the store holds it: its version and the lease of the replica
    /// fulfilling it. Never on the wire, like `owner`: only
    /// [`Task::stored`] writes it and [`Task::from_stored`] reads it.
    pub revision: Revision,
}

/// A task's place in its store ([`Task::revision`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Revision {
    /// One more with every save (the first save is 1; 0: never stored). A
    /// store takes a save only over the version before it (compare and
    /// swap), so two replicas never overwrite each other.
    pub version: u64,
    /// The replica fulfilling the task and until when (Unix ms) its claim
    /// holds unless renewed; `None` once it stops running.
    pub lease: Option<Lease>,
}

/// A running task's claim by one replica ([`Revision::lease`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub holder: String,
    pub until_ms: u64,
}

pub(crate) fn text_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// The text parts among `parts` joined by `"\n"`; `None` when none is text.
fn joined_text<'a>(parts: impl Iterator<Item = &'a [Part]>) -> Option<String> {
    // Plain loops: iterator adaptors over parts cost the npm `.wasm` more.
    let mut out: Option<String> = None;
    for list in parts {
        for p in list {
            if let Part::Text(t) = p {
                match &mut out {
                    Some(s) => {
                        s.push('\n');
                        s.push_str(t);
                    }
                    None => out = Some(t.clone()),
                }
            }
        }
    }
    out
}

impl Message {
    /// An agent message with one text part.
    pub fn agent_text(message_id: String, text: String) -> Self {
        Message {
            role: Role::Agent,
            message_id,
            parts: vec![Part::Text(text)],
            context_id: None,
            task_id: None,
        }
    }

    /// Reads a message leniently; `None` when `v` is not an object.
    pub fn from_value(v: &Value) -> Option<Message> {
        v.as_object()?;
        Some(Message {
            role: Role::parse(v.get("role").and_then(Value::as_str).unwrap_or("user")),
            message_id: text_of(v, "messageId").unwrap_or_default(),
            parts: read_parts(v),
            context_id: text_of(v, "contextId"),
            task_id: text_of(v, "taskId"),
        })
    }

    /// The text parts joined by `"\n"`.
    pub fn text(&self) -> String {
        joined_text(std::iter::once(&self.parts[..])).unwrap_or_default()
    }

    /// The message in the given wire shape, to serialise.
    pub fn shaped(&self, shape: Shape) -> Shaped<'_, Message> {
        Shaped(self, shape)
    }

    /// The message in the given wire shape.
    pub fn to_value(&self, shape: Shape) -> Value {
        serde_json::to_value(Shaped(self, shape)).unwrap_or(Value::Null)
    }
}

impl Artifact {
    /// Reads an artifact leniently (a missing id reads as `""`).
    pub fn from_value(v: &Value) -> Artifact {
        Artifact {
            artifact_id: text_of(v, "artifactId").unwrap_or_default(),
            parts: read_parts(v),
        }
    }
}

impl Task {
    /// Reads a task leniently: it needs a string `id`; a missing or unknown
    /// state reads as [`TaskState::Unknown`].
    pub fn from_value(v: &Value) -> Option<Task> {
        let id = text_of(v, "id")?;
        let status = v.get("status");
        let state_text = status.and_then(|s| s.get("state")).and_then(Value::as_str);
        let state = state_text.map_or(TaskState::Unknown, TaskState::parse);
        let dialect = match state_text {
            Some(s) if s.starts_with("TASK_STATE_") => Shape::V10,
            _ => Shape::V03,
        };
        let list = |key: &str| {
            v.get(key)
                .and_then(Value::as_array)
                .map_or(&[][..], Vec::as_slice)
        };
        let context_id = text_of(v, "contextId").unwrap_or_default();
        // A message repeating the task's own ids keeps none (they are written back on the wire).
        let inner = |m: &Value| {
            let mut m = Message::from_value(m)?;
            if m.context_id.as_deref() == Some(context_id.as_str()) {
                m.context_id = None;
            }
            if m.task_id.as_deref() == Some(id.as_str()) {
                m.task_id = None;
            }
            Some(m)
        };
        // Plain loops, not `filter_map(..).collect()` chains (see ARCHITECTURE.md).
        let mut history = Vec::new();
        for m in list("history") {
            if let Some(m) = inner(m) {
                history.push(m);
            }
        }
        let mut artifacts = Vec::new();
        for a in list("artifacts") {
            artifacts.push(Artifact::from_value(a));
        }
        Some(Task {
            status_message: status.and_then(|s| s.get("message")).and_then(inner),
            updated_ms: status
                .and_then(|s| s.get("timestamp"))
                .and_then(Value::as_str)
                .and_then(crate::model::time::parse_rfc3339),
            history,
            id: id.clone(),
            context_id: context_id.clone(),
            state,
            artifacts,
            dialect,
            owner: None,
            trace: None,
            revision: Revision::default(),
        })
    }

    /// Reads a task a store wrote with [`Task::stored`]: its wire shape and
    /// its `owner` (absent, as in files from before owners: no owner).
    pub fn from_stored(v: &Value) -> Option<Task> {
        let mut task = Task::from_value(v)?;
        task.owner = text_of(v, STORED_OWNER);
        task.trace = v
            .get(crate::TRACEPARENT)
            .and_then(Value::as_str)
            .and_then(|p| {
                let state = v.get(crate::TRACESTATE).and_then(Value::as_str);
                crate::TraceContext::parse(p, state)
            })
            .map(Box::new);
        task.revision.version = v.get(STORED_VERSION).and_then(Value::as_u64).unwrap_or(0);
        task.revision.lease = v.get(STORED_LEASE).and_then(|l| {
            Some(Lease {
                holder: text_of(l, "holder")?,
                until_ms: l.get("until")?.as_u64()?,
            })
        });
        Some(task)
    }

    /// The task as a store keeps it: its wire shape in its own dialect,
    /// plus its `owner` (which no answer, event or notification carries).
    /// Read back with [`Task::from_stored`].
    pub fn stored(&self) -> StoredTask<'_> {
        StoredTask(self)
    }

    /// All artifact text parts joined by `"\n"`, or `None` when there are none.
    pub fn artifact_text(&self) -> Option<String> {
        joined_text(self.artifacts.iter().map(|a| &a.parts[..]))
    }

    /// The text of the status message, when it has any.
    pub fn status_text(&self) -> Option<String> {
        self.status_message
            .as_ref()
            .map(Message::text)
            .filter(|t| !t.is_empty())
    }

    /// What a completed task answered: the artifacts' text, else the last
    /// agent message in the history, else the status message, else `""`.
    pub fn output_text(&self) -> String {
        self.artifact_text()
            .or_else(|| {
                self.history
                    .iter()
                    .rev()
                    .find(|m| m.role == Role::Agent)
                    .map(Message::text)
            })
            .or_else(|| self.status_text())
            .unwrap_or_default()
    }

    /// What a task list shows for it: a completed task's answer
    /// ([`Task::output_text`]), else its status message (a question, an
    /// error), else `""`.
    pub fn summary_text(&self) -> String {
        match self.state {
            TaskState::Completed => self.output_text(),
            _ => self.status_text().unwrap_or_default(),
        }
    }

    /// The task in the given wire shape.
    pub fn to_value(&self, shape: Shape) -> Value {
        serde_json::to_value(Shaped(self, shape)).unwrap_or(Value::Null)
    }

    /// The task in the given wire shape, keeping only the last `n` history
    /// messages when `history_length` is `Some(n)`.
    pub fn shaped(&self, shape: Shape, history_length: Option<usize>) -> ShapedTask<'_> {
        ShapedTask {
            task: self,
            shape,
            history_length,
        }
    }
}

/// The key of a task's owner in its stored form (never on the wire).
pub const STORED_OWNER: &str = "owner";
/// The stored form's key of [`Revision::version`].
pub const STORED_VERSION: &str = "version";
/// The stored form's key of [`Revision::lease`] (`{"holder", "until"}`).
pub const STORED_LEASE: &str = "lease";

/// A task as a store keeps it ([`Task::stored`]).
pub struct StoredTask<'a>(pub &'a Task);

impl Serialize for StoredTask<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        write_task(t, t.dialect, None, Some(t), s)
    }
}

/// A value written in one wire shape (serialises without building a `Value`).
pub struct Shaped<'a, T>(pub &'a T, pub Shape);

/// A task written in one wire shape, with its history optionally trimmed.
pub struct ShapedTask<'a> {
    pub task: &'a Task,
    pub shape: Shape,
    pub history_length: Option<usize>,
}

impl Serialize for Shaped<'_, Message> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        InTask(self.0, self.1, None, None).serialize(s)
    }
}

/// A message inside a task: without ids of its own, it carries the task's
/// `contextId` and `taskId` on the wire (so stores keep them once).
pub(crate) struct InTask<'a>(
    pub(crate) &'a Message,
    pub(crate) Shape,
    /// The task's context id.
    pub(crate) Option<&'a str>,
    /// The task's id.
    pub(crate) Option<&'a str>,
);

impl Serialize for InTask<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (m, shape) = (self.0, self.1);
        let mut map = s.serialize_map(None)?;
        if shape == Shape::V03 {
            map.serialize_entry("kind", "message")?;
        }
        let role = match (m.role, shape) {
            (Role::User, Shape::V03) => "user",
            (Role::Agent, Shape::V03) => "agent",
            (Role::User, Shape::V10) => "ROLE_USER",
            (Role::Agent, Shape::V10) => "ROLE_AGENT",
        };
        map.serialize_entry("role", role)?;
        map.serialize_entry("messageId", &m.message_id)?;
        map.serialize_entry("parts", &Parts(&m.parts, shape))?;
        let context_id = m.context_id.as_deref().or(self.2);
        if let Some(c) = context_id {
            map.serialize_entry("contextId", c)?;
        }
        if let Some(t) = m.task_id.as_deref().or(self.3) {
            map.serialize_entry("taskId", t)?;
        }
        map.end()
    }
}

impl Serialize for Shaped<'_, Task> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.shaped(self.1, None).serialize(s)
    }
}

impl Serialize for ShapedTask<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // The wire form: never the owner.
        write_task(self.task, self.shape, self.history_length, None, s)
    }
}

/// A task in `shape`, its history trimmed to `history_length`, and with
/// `owner`, `trace` and the revision only in the stored form (`stored`: the task again).
fn write_task<S: Serializer>(
    t: &Task,
    shape: Shape,
    history_length: Option<usize>,
    stored: Option<&Task>,
    s: S,
) -> Result<S::Ok, S::Error> {
    {
        struct Status<'a>(&'a Task, Shape);
        impl Serialize for Status<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = s.serialize_map(None)?;
                let state = match self.1 {
                    Shape::V03 => self.0.state.as_str(),
                    Shape::V10 => self.0.state.as_v10(),
                };
                map.serialize_entry("state", state)?;
                if let Some(ms) = self.0.updated_ms {
                    let mut buf = [0; crate::model::time::RFC3339_LEN];
                    map.serialize_entry(
                        "timestamp",
                        crate::model::time::write_rfc3339(ms, &mut buf),
                    )?;
                }
                if let Some(m) = &self.0.status_message {
                    map.serialize_entry(
                        "message",
                        &InTask(m, self.1, Some(&self.0.context_id), Some(&self.0.id)),
                    )?;
                }
                map.end()
            }
        }
        struct Artifacts<'a>(&'a [Artifact], Shape);
        impl Serialize for Artifacts<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.iter().map(|a| ShapedArtifact(a, self.1)))
            }
        }
        let history = match history_length {
            Some(n) if n < t.history.len() => &t.history[t.history.len() - n..],
            _ => &t.history[..],
        };
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("id", &t.id)?;
        map.serialize_entry("contextId", &t.context_id)?;
        if shape == Shape::V03 {
            map.serialize_entry("kind", "task")?;
        }
        map.serialize_entry("status", &Status(t, shape))?;
        if !t.artifacts.is_empty() {
            map.serialize_entry("artifacts", &Artifacts(&t.artifacts, shape))?;
        }
        if !history.is_empty() {
            let history: Vec<InTask<'_>> = history
                .iter()
                .map(|m| InTask(m, shape, Some(&t.context_id), Some(&t.id)))
                .collect();
            map.serialize_entry("history", &history)?;
        }
        if let Some(t) = stored {
            if let Some(owner) = &t.owner {
                map.serialize_entry(STORED_OWNER, owner)?;
            }
            if t.revision.version > 0 {
                map.serialize_entry(STORED_VERSION, &t.revision.version)?;
            }
            if let Some(lease) = &t.revision.lease {
                struct L<'a>(&'a Lease);
                impl Serialize for L<'_> {
                    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                        let mut map = s.serialize_map(Some(2))?;
                        map.serialize_entry("holder", &self.0.holder)?;
                        map.serialize_entry("until", &self.0.until_ms)?;
                        map.end()
                    }
                }
                map.serialize_entry(STORED_LEASE, &L(lease))?;
            }
        }
        if let Some(trace) = stored.and_then(|t| t.trace.as_ref()) {
            map.serialize_entry(crate::TRACEPARENT, &trace.traceparent())?;
            if let Some(state) = &trace.state {
                map.serialize_entry(crate::TRACESTATE, state)?;
            }
        }
        map.end()
    }
}

/// One artifact in one wire shape.
pub(crate) struct ShapedArtifact<'a>(pub(crate) &'a Artifact, pub(crate) Shape);

impl Serialize for ShapedArtifact<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("artifactId", &self.0.artifact_id)?;
        map.serialize_entry("parts", &Parts(&self.0.parts, self.1))?;
        map.end()
    }
}

/// What a SendMessage returned: a task to follow, or a direct message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendResult {
    Task(Task),
    Message(Message),
}

impl SendResult {
    /// Reads a SendMessage `result` in any shape: a bare task (toolnexus,
    /// 0.3), `{task}` / `{message}` (1.0), or a bare 0.3 message.
    pub fn from_value(v: &Value) -> Option<SendResult> {
        if let Some(t) = v.get("task") {
            return Task::from_value(t).map(SendResult::Task);
        }
        if let Some(m) = v.get("message") {
            return Message::from_value(m).map(SendResult::Message);
        }
        let is_message = v.get("kind").and_then(Value::as_str) == Some("message")
            || (v.get("status").is_none() && v.get("parts").is_some());
        if is_message {
            return Message::from_value(v).map(SendResult::Message);
        }
        Task::from_value(v).map(SendResult::Task)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn states_read_in_every_spelling() {
        assert_eq!(TaskState::parse("completed"), TaskState::Completed);
        assert_eq!(
            TaskState::parse("TASK_STATE_COMPLETED"),
            TaskState::Completed
        );
        assert_eq!(
            TaskState::parse("TASK_STATE_INPUT_REQUIRED"),
            TaskState::InputRequired
        );
        assert_eq!(TaskState::parse("auth-required"), TaskState::AuthRequired);
        assert_eq!(TaskState::parse("cancelled"), TaskState::Canceled);
        assert_eq!(TaskState::parse("bogus"), TaskState::Unknown);
        for s in [
            TaskState::Working,
            TaskState::Rejected,
            TaskState::InputRequired,
        ] {
            assert_eq!(TaskState::parse(s.as_str()), s);
            assert_eq!(TaskState::parse(s.as_v10()), s);
        }
    }

    #[test]
    fn reads_a_10_task_and_writes_it_back_in_both_shapes() {
        let v = json!({"task": {"id": "t1", "contextId": "c1",
            "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a", "parts": [{"text": "one"}, {"mediaType": "text/plain", "text": "two"}]}],
            "history": [{"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "q"}]}]}});
        let SendResult::Task(t) = SendResult::from_value(&v).expect("task") else {
            panic!("not a task")
        };
        assert_eq!(t.state, TaskState::Completed);
        assert_eq!(t.output_text(), "one\ntwo");
        let v03 = t.to_value(Shape::V03);
        assert_eq!(v03["kind"], "task");
        assert_eq!(v03["status"]["state"], "completed");
        assert_eq!(
            v03["artifacts"][0]["parts"][0],
            json!({"kind": "text", "text": "one"})
        );
        assert_eq!(v03["history"][0]["role"], "user");
        let v10 = t.to_value(Shape::V10);
        assert_eq!(v10["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(v10["artifacts"][0]["parts"][0], json!({"text": "one"}));
        assert!(v10.get("kind").is_none());
        assert_eq!(t.dialect, Shape::V10, "read from its state's spelling");
        assert_eq!(Task::from_value(&v10), Some(t.clone()));
        let t03 = Task::from_value(&v03).expect("task");
        assert_eq!(t03.dialect, Shape::V03);
        assert_eq!(
            Task {
                dialect: Shape::V10,
                ..t03
            },
            t
        );
    }

    #[test]
    fn output_falls_back_to_history_then_status() {
        let t = Task::from_value(&json!({"id": "t", "status": {"state": "completed",
            "message": {"role": "agent", "parts": [{"kind": "text", "text": "status says"}]}},
            "history": [{"role": "agent", "parts": [{"kind": "text", "text": "first"}]},
                        {"role": "agent", "parts": [{"kind": "text", "text": "last"}, {"kind": "data", "data": {}}]},
                        {"role": "user", "parts": [{"kind": "text", "text": "q"}]}]})).expect("task");
        assert_eq!(t.output_text(), "last");
        let t = Task::from_value(&json!({"id": "t", "status": {"state": "completed",
            "message": {"role": "ROLE_AGENT", "parts": [{"text": "status says"}]}}}))
        .expect("task");
        assert_eq!(t.output_text(), "status says");
    }

    #[test]
    fn a_summary_is_the_answer_when_completed_else_the_status_message() {
        let history =
            json!([{"role": "agent", "parts": [{"kind": "text", "text": "an earlier turn"}]}]);
        let done = Task::from_value(&json!({"id": "t", "history": history,
            "status": {"state": "completed"}}))
        .expect("task");
        assert_eq!(done.summary_text(), "an earlier turn");
        let asking = Task::from_value(&json!({"id": "t", "history": history,
            "status": {"state": "input-required",
                "message": {"role": "agent", "parts": [{"kind": "text", "text": "Which city?"}]}}}))
        .expect("task");
        assert_eq!(asking.summary_text(), "Which city?");
        let working = Task::from_value(&json!({"id": "t", "history": history,
            "status": {"state": "working"}}))
        .expect("task");
        assert_eq!(working.summary_text(), "");
    }

    #[test]
    fn direct_messages_are_recognised() {
        for v in [
            json!({"message": {"role": "ROLE_AGENT", "messageId": "m", "parts": [{"text": "hi"}]}}),
            json!({"kind": "message", "role": "agent", "messageId": "m", "parts": [{"kind": "text", "text": "hi"}]}),
        ] {
            let Some(SendResult::Message(m)) = SendResult::from_value(&v) else {
                panic!("{v}")
            };
            assert_eq!((m.role, m.text()), (Role::Agent, "hi".to_string()));
        }
        assert_eq!(SendResult::from_value(&json!({"status": {}})), None);
        assert_eq!(SendResult::from_value(&json!("x")), None);
    }
}
