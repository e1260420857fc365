//! The events of an A2A stream (`SendStreamingMessage`, `SubscribeToTask`),
//! read from any shape and written in the 0.3 or the 1.0 shape.
//!
//! 1.0 wraps each event in a one-key object (`{"task"}`, `{"message"}`,
//! `{"statusUpdate"}`, `{"artifactUpdate"}`); 0.3 marks it with `kind`
//! (`task`, `message`, `status-update` with `final`, `artifact-update`).

use crate::model::task::{
    text_of, Artifact, InTask, Message, Shape, ShapedArtifact, Task, TaskState,
};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::Value;

/// A change of a task's status (its state, and the agent's message about it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusUpdate {
    pub task_id: String,
    pub context_id: String,
    pub state: TaskState,
    pub message: Option<Message>,
    /// `status.timestamp` as the peer wrote it (ISO 8601), when it did.
    pub timestamp: Option<String>,
}

/// An artifact, or a chunk of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactUpdate {
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    /// Append these parts to the artifact with the same id (else replace it).
    pub append: bool,
    /// The artifact is complete.
    pub last_chunk: bool,
}

/// One event of an A2A stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// The whole task: the first event of a stream, and of a resubscription.
    Task(Task),
    /// The agent answered with a message instead of a task.
    Message(Message),
    /// The task's status changed.
    Status(StatusUpdate),
    /// An artifact, or a chunk of one.
    Artifact(ArtifactUpdate),
}

fn flag(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

impl StreamEvent {
    /// Reads an event (a stream response's `result`) in any shape; `None`
    /// when it is none of the four.
    pub fn from_value(v: &Value) -> Option<StreamEvent> {
        let status = |u: &Value| {
            let status = u.get("status")?;
            let task_id = text_of(u, "taskId")?;
            let context_id = text_of(u, "contextId").unwrap_or_default();
            let mut message = status.get("message").and_then(Message::from_value);
            if let Some(m) = &mut message {
                // Ids that repeat the task's are not kept (see `Task::from_value`).
                if m.task_id.as_deref() == Some(task_id.as_str()) {
                    m.task_id = None;
                }
                if m.context_id.as_deref() == Some(context_id.as_str()) {
                    m.context_id = None;
                }
            }
            Some(StreamEvent::Status(StatusUpdate {
                state: status
                    .get("state")
                    .and_then(Value::as_str)
                    .map_or(TaskState::Unknown, TaskState::parse),
                timestamp: text_of(status, "timestamp"),
                task_id,
                context_id,
                message,
            }))
        };
        let artifact = |u: &Value| {
            Some(StreamEvent::Artifact(ArtifactUpdate {
                task_id: text_of(u, "taskId")?,
                context_id: text_of(u, "contextId").unwrap_or_default(),
                artifact: Artifact::from_value(u.get("artifact")?),
                append: flag(u, "append"),
                last_chunk: flag(u, "lastChunk"),
            }))
        };
        if !v.is_object() {
            return None;
        }
        if let Some(u) = v.get("statusUpdate") {
            return status(u);
        }
        if let Some(u) = v.get("artifactUpdate") {
            return artifact(u);
        }
        if let Some(t) = v.get("task") {
            return Task::from_value(t).map(StreamEvent::Task);
        }
        if let Some(m) = v.get("message") {
            return Message::from_value(m).map(StreamEvent::Message);
        }
        match v.get("kind").and_then(Value::as_str) {
            Some("status-update") => status(v),
            Some("artifact-update") => artifact(v),
            Some("message") => Message::from_value(v).map(StreamEvent::Message),
            _ => Task::from_value(v).map(StreamEvent::Task),
        }
    }

    /// The event in the given wire shape.
    pub fn shaped(&self, shape: Shape) -> ShapedEvent<'_> {
        ShapedEvent(self, shape)
    }

    /// The task state this event leaves the task in, if it says.
    pub fn state(&self) -> Option<TaskState> {
        match self {
            StreamEvent::Task(t) => Some(t.state),
            StreamEvent::Status(s) => Some(s.state),
            StreamEvent::Message(_) | StreamEvent::Artifact(_) => None,
        }
    }
}

impl Task {
    /// Applies a status or artifact event to this task (a client's view of
    /// a task it follows). A `Task` event replaces the whole view.
    pub fn apply(&mut self, event: &StreamEvent) {
        match event {
            StreamEvent::Task(t) => *self = t.clone(),
            StreamEvent::Message(_) => {}
            StreamEvent::Status(s) => {
                self.state = s.state;
                self.status_message = s.message.clone();
                if let Some(ms) = s
                    .timestamp
                    .as_deref()
                    .and_then(crate::model::time::parse_rfc3339)
                {
                    self.updated_ms = Some(ms);
                }
                if self.context_id.is_empty() {
                    self.context_id = s.context_id.clone();
                }
            }
            StreamEvent::Artifact(a) => {
                let same = self
                    .artifacts
                    .iter_mut()
                    .find(|x| x.artifact_id == a.artifact.artifact_id);
                match same {
                    Some(x) if a.append => x.parts.extend(a.artifact.parts.iter().cloned()),
                    Some(x) => *x = a.artifact.clone(),
                    None => self.artifacts.push(a.artifact.clone()),
                }
            }
        }
    }
}

/// A stream event in one wire shape (serialises without building a `Value`).
pub struct ShapedEvent<'a>(&'a StreamEvent, Shape);

struct StatusOut<'a>(&'a StatusUpdate, Shape);

impl Serialize for StatusOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (u, shape) = (self.0, self.1);
        let mut map = s.serialize_map(None)?;
        let state = match shape {
            Shape::V03 => u.state.as_str(),
            Shape::V10 => u.state.as_v10(),
        };
        map.serialize_entry("state", state)?;
        if let Some(m) = &u.message {
            let ids = (Some(u.context_id.as_str()), Some(u.task_id.as_str()));
            map.serialize_entry("message", &InTask(m, shape, ids.0, ids.1))?;
        }
        if let Some(t) = &u.timestamp {
            map.serialize_entry("timestamp", t)?;
        }
        map.end()
    }
}

impl Serialize for ShapedEvent<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Body<'a>(&'a StreamEvent, Shape);
        impl Serialize for Body<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let shape = self.1;
                let v03 = shape == Shape::V03;
                match self.0 {
                    StreamEvent::Task(t) => t.shaped(shape, None).serialize(s),
                    StreamEvent::Message(m) => m.shaped(shape).serialize(s),
                    StreamEvent::Status(u) => {
                        let mut map = s.serialize_map(None)?;
                        if v03 {
                            map.serialize_entry("kind", "status-update")?;
                        }
                        map.serialize_entry("taskId", &u.task_id)?;
                        map.serialize_entry("contextId", &u.context_id)?;
                        map.serialize_entry("status", &StatusOut(u, shape))?;
                        if v03 {
                            let last = u.state.is_terminal() || u.state.is_interrupted();
                            map.serialize_entry("final", &last)?;
                        }
                        map.end()
                    }
                    StreamEvent::Artifact(u) => {
                        let mut map = s.serialize_map(None)?;
                        if v03 {
                            map.serialize_entry("kind", "artifact-update")?;
                        }
                        map.serialize_entry("taskId", &u.task_id)?;
                        map.serialize_entry("contextId", &u.context_id)?;
                        map.serialize_entry("artifact", &ShapedArtifact(&u.artifact, shape))?;
                        map.serialize_entry("append", &u.append)?;
                        map.serialize_entry("lastChunk", &u.last_chunk)?;
                        map.end()
                    }
                }
            }
        }
        let body = Body(self.0, self.1);
        if self.1 == Shape::V03 {
            return body.serialize(s);
        }
        let key = match self.0 {
            StreamEvent::Task(_) => "task",
            StreamEvent::Message(_) => "message",
            StreamEvent::Status(_) => "statusUpdate",
            StreamEvent::Artifact(_) => "artifactUpdate",
        };
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry(key, &body)?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn read(v: Value) -> StreamEvent {
        StreamEvent::from_value(&v).expect("an event")
    }

    #[test]
    fn reads_the_four_events_in_both_shapes() {
        let s10 = read(json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_WORKING"}, "metadata": {}}}));
        let s03 = read(
            json!({"kind": "status-update", "taskId": "t", "contextId": "c",
            "status": {"state": "working"}, "final": false}),
        );
        assert_eq!(s10, s03);
        assert_eq!(s10.state(), Some(TaskState::Working));
        let stamped = read(json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-12-01T11:38:37.303Z"}}}));
        let StreamEvent::Status(u) = &stamped else {
            panic!("a status update: {stamped:?}")
        };
        assert_eq!(u.timestamp.as_deref(), Some("2026-12-01T11:38:37.303Z"));
        let v03 = serde_json::to_value(stamped.shaped(Shape::V03)).expect("json");
        assert_eq!(v03["status"]["timestamp"], "2026-12-01T11:38:37.303Z");

        let a10 = read(json!({"artifactUpdate": {"taskId": "t", "contextId": "c",
            "artifact": {"artifactId": "a", "parts": [{"text": "hi", "mediaType": "text/plain"}]},
            "lastChunk": true}}));
        let a03 = read(
            json!({"kind": "artifact-update", "taskId": "t", "contextId": "c",
            "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": "hi"}]},
            "append": false, "lastChunk": true}),
        );
        assert_eq!(a10, a03);

        let t10 = read(json!({"task": {"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_SUBMITTED"}}}));
        let t03 = read(json!({"kind": "task", "id": "t", "contextId": "c",
            "status": {"state": "submitted"}}));
        let StreamEvent::Task(t10) = t10 else {
            panic!("a task")
        };
        assert_eq!(t10.dialect, Shape::V10);
        assert_eq!(
            t03,
            StreamEvent::Task(Task {
                dialect: Shape::V03,
                ..t10
            })
        );
        assert!(matches!(
            read(json!({"message": {"role": "ROLE_AGENT", "parts": [{"text": "x"}]}})),
            StreamEvent::Message(_)
        ));
        assert_eq!(
            StreamEvent::from_value(&json!({"kind": "status-update"})),
            None
        );
        assert_eq!(StreamEvent::from_value(&json!([1])), None);
    }

    #[test]
    fn writes_round_trip_in_both_shapes() {
        let msg = Message::agent_text("m1".into(), "thinking".into());
        let events = [
            StreamEvent::Status(StatusUpdate {
                task_id: "t".into(),
                context_id: "c".into(),
                state: TaskState::Working,
                timestamp: None,
                message: Some(msg),
            }),
            StreamEvent::Artifact(ArtifactUpdate {
                task_id: "t".into(),
                context_id: "c".into(),
                artifact: Artifact {
                    artifact_id: "a".into(),
                    parts: vec!["chunk".into()],
                },
                append: true,
                last_chunk: false,
            }),
        ];
        for e in &events {
            for shape in [Shape::V03, Shape::V10] {
                let v = serde_json::to_value(e.shaped(shape)).expect("json");
                assert_eq!(&read(v), e, "{shape:?}");
            }
        }
        let v03 = serde_json::to_value(events[0].shaped(Shape::V03)).expect("json");
        assert_eq!(v03["kind"], "status-update");
        assert_eq!(v03["final"], false);
        assert_eq!(v03["status"]["message"]["taskId"], "t");
        let v10 = serde_json::to_value(events[1].shaped(Shape::V10)).expect("json");
        assert_eq!(
            v10["artifactUpdate"]["artifact"]["parts"][0],
            json!({"text": "chunk"})
        );
    }

    #[test]
    fn applying_events_builds_the_task() {
        let mut t = Task::from_value(&json!({"id": "t", "contextId": "c",
            "status": {"state": "submitted"}}))
        .expect("task");
        let chunk = |text: &str, append| {
            read(
                json!({"kind": "artifact-update", "taskId": "t", "contextId": "c",
                "artifact": {"artifactId": "a", "parts": [{"kind": "text", "text": text}]},
                "append": append}),
            )
        };
        t.apply(&chunk("one", false));
        t.apply(&chunk("two", true));
        t.apply(&read(
            json!({"kind": "status-update", "taskId": "t", "contextId": "c",
            "status": {"state": "completed"}, "final": true}),
        ));
        assert_eq!(t.state, TaskState::Completed);
        assert_eq!(t.output_text(), "one\ntwo");
        t.apply(&chunk("fresh", false));
        assert_eq!(t.output_text(), "fresh");
    }
}
