//! Conversations: a message that continues a task waiting for input, and
//! the earlier turns of a context that a new task's fulfiller sees.
//!
//! Nothing here is kept apart from the tasks: a context's memory is its
//! tasks in the store, so a store that keeps tasks (the file store, across
//! restarts) keeps conversations too.

use super::rpc::{self, RpcError};
use crate::model::task::{Message, Role, Task, TaskState};

/// The most messages of earlier turns a fulfiller is given (the latest ones).
pub const MAX_CONTEXT_MESSAGES: usize = 40;

/// Why a message naming `task` (a follow-up on it) cannot continue it, if
/// it cannot: a `context_id` that contradicts the task's is invalid, and
/// only a task waiting for the caller (input-required, auth-required)
/// takes a message; a terminal one takes no more (-32004, as the spec asks).
pub(crate) fn refuse_continuation(task: &Task, context_id: Option<&str>) -> Option<RpcError> {
    let id = &task.id;
    if let Some(context_id) = context_id.filter(|c| *c != task.context_id) {
        return Some(RpcError::invalid_params(&format!(
            "message.contextId {context_id} is not the context of task {id} ({})",
            task.context_id
        )));
    }
    let state = task.state.as_str();
    if task.state.is_terminal() {
        return Some(RpcError::new(
            rpc::UNSUPPORTED_OPERATION,
            format!("Task {id} is {state}: a task in a terminal state takes no more messages"),
        ));
    }
    if !task.state.is_interrupted() {
        return Some(running(id, state));
    }
    None
}

/// The error for a follow-up on a task that is working, not waiting for input.
pub(crate) fn running(id: &str, state: &str) -> RpcError {
    RpcError::new(
        rpc::UNSUPPORTED_OPERATION,
        format!("Task {id} is {state}: it takes a message only while it waits for input (input-required or auth-required)"),
    )
}

/// The stored `task` continued with the caller's `answer`: its question
/// (the status message) joins its history, then the answer; it is working again.
pub(crate) fn continued(mut task: Task, answer: Message, now_ms: Option<u64>) -> Task {
    if let Some(question) = task.status_message.take() {
        if !task
            .history
            .iter()
            .any(|m| m.message_id == question.message_id)
        {
            task.history.push(question);
        }
    }
    task.history.push(answer);
    task.state = TaskState::Working;
    task.updated_ms = now_ms.or(task.updated_ms);
    task
}

/// The turns of a conversation, oldest first, at most `max` messages (the
/// latest): from each task of the context that completed or waits for
/// input, in the order of their status changes (then of their ids), its
/// messages and then its answer or question. Tasks still working, failed or canceled add nothing.
pub fn context_turns(mut tasks: Vec<Task>, max: usize) -> Vec<Message> {
    tasks.retain(|t| t.state == TaskState::Completed || t.state.is_interrupted());
    // Oldest first: ListTasks' order (the one sort of tasks), reversed.
    super::list::newest_first(&mut tasks);
    tasks.reverse();
    let mut turns = Vec::new();
    for task in tasks {
        let last = match task.state {
            TaskState::Completed => {
                let answer = task.output_text();
                (!answer.is_empty()).then(|| Message::agent_text(String::new(), answer))
            }
            _ => task.status_message.clone(),
        };
        let mut history = task.history;
        if let Some(last) = last {
            // Stores may keep the answer in the history as well.
            let repeated = history
                .last()
                .is_some_and(|m| m.role == Role::Agent && m.text() == last.text());
            if !repeated {
                history.push(last);
            }
        }
        turns.extend(history);
    }
    let skip = turns.len().saturating_sub(max);
    turns.drain(..skip);
    turns
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::task::Artifact;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn user(text: &str) -> Message {
        Message {
            role: Role::User,
            message_id: format!("u-{text}"),
            parts: vec![text.into()],
            context_id: None,
            task_id: None,
        }
    }

    fn task(id: &str, state: TaskState, at: u64, said: &str, answer: &str) -> Task {
        let mut t = Task {
            id: id.into(),
            context_id: "c".into(),
            state,
            status_message: None,
            updated_ms: Some(at),
            artifacts: Vec::new(),
            history: vec![user(said)],
            dialect: crate::model::task::Shape::V03,
            owner: None,
            trace: None,
            revision: Default::default(),
        };
        if state == TaskState::Completed {
            t.artifacts.push(Artifact {
                artifact_id: "a".into(),
                parts: vec![answer.into()],
            });
        } else {
            t.status_message = Some(Message::agent_text("q".into(), answer.into()));
        }
        t
    }

    fn texts(turns: &[Message]) -> Vec<(Role, String)> {
        turns.iter().map(|m| (m.role, m.text())).collect()
    }

    #[test]
    fn a_context_is_its_answered_and_waiting_tasks_in_status_order_bounded() {
        let tasks = vec![
            task("t2", TaskState::InputRequired, 20, "book it", "Which day?"),
            task("t1", TaskState::Completed, 10, "hi", "hello"),
            task("t3", TaskState::Failed, 30, "boom", "model down"),
            task("t4", TaskState::Working, 40, "later", ""),
        ];
        let all = context_turns(tasks.clone(), MAX_CONTEXT_MESSAGES);
        assert_eq!(
            texts(&all),
            vec![
                (Role::User, "hi".into()),
                (Role::Agent, "hello".into()),
                (Role::User, "book it".into()),
                (Role::Agent, "Which day?".into()),
            ]
        );
        let latest = context_turns(tasks, 3);
        assert_eq!(texts(&latest)[0], (Role::Agent, "hello".into()));
        assert_eq!(latest.len(), 3);
    }

    #[test]
    fn only_a_task_waiting_for_input_in_its_own_context_is_continued() {
        let waiting = task("t", TaskState::InputRequired, 1, "book it", "Which day?");
        assert!(refuse_continuation(&waiting, None).is_none());
        assert!(refuse_continuation(&waiting, Some("c")).is_none());
        assert_eq!(
            refuse_continuation(&waiting, Some("other")).map(|e| e.code),
            Some(rpc::INVALID_PARAMS)
        );
        for state in [
            TaskState::Working,
            TaskState::Submitted,
            TaskState::Completed,
        ] {
            let t = Task {
                state,
                ..waiting.clone()
            };
            assert_eq!(
                refuse_continuation(&t, None).map(|e| e.code),
                Some(rpc::UNSUPPORTED_OPERATION),
                "{state:?}"
            );
        }
        let auth = Task {
            state: TaskState::AuthRequired,
            ..waiting.clone()
        };
        assert!(refuse_continuation(&auth, None).is_none());

        let next = continued(waiting, user("Friday"), Some(5));
        assert_eq!(next.state, TaskState::Working);
        assert_eq!(next.status_message, None);
        assert_eq!(next.updated_ms, Some(5));
        assert_eq!(
            texts(&next.history),
            vec![
                (Role::User, "book it".into()),
                (Role::Agent, "Which day?".into()),
                (Role::User, "Friday".into()),
            ]
        );
    }
}
