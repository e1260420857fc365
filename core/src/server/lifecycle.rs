//! A task's life in the server: reading it for a caller, creating it,
//! starting its fulfilment, continuing and canceling it.

use super::*;

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// The stored task `params.id` names. A plain function: an async
    /// wrapper around [`Self::stored`] would be a state machine of its own.
    pub(super) fn existing<'a>(
        &'a self,
        params: &'a Value,
        owner: Owner<'a>,
    ) -> impl Future<Output = Result<Task, RpcError>> + 'a {
        self.stored(task_id(params), owner)
    }

    /// The stored task `id` (or the error reading it from the call): unknown
    /// is -32001, and so is another caller's (the same answer, so nothing
    /// tells that it exists).
    pub(super) async fn stored(
        &self,
        id: Result<&str, RpcError>,
        owner: Owner<'_>,
    ) -> Result<Task, RpcError> {
        let id = id?;
        match self.store.get(id).await {
            Ok(Some(task)) if !visible(&task, owner) => Err(task_not_found(id)),
            Ok(Some(task)) if self.abandoned(&task) => Box::pin(self.fail_abandoned(task)).await,
            Ok(Some(task)) => Ok(task),
            Ok(None) => Err(task_not_found(id)),
            Err(e) => Err(RpcError::internal(format!("the task store failed: {e}"))),
        }
    }

    /// The task a follow-up names, as its caller last heard of it. A
    /// stream tells of a state as it happens and the store a moment later,
    /// so a task whose question or outcome is decided here but still being
    /// saved is waited for; one still working is refused as such; any
    /// other is read from the store.
    pub(super) async fn to_continue(&self, id: &str, owner: Owner<'_>) -> Result<Task, RpcError> {
        let slot = {
            let mut tasks = self.tasks();
            match tasks.task(id) {
                Some(task) if !visible(task, owner) => return Err(task_not_found(id)),
                Some(task) if !machine::ends_stream(task.state) => return Ok(task.clone()),
                Some(_) => tasks.wait(id, Until::Stops),
                None => None,
            }
        };
        if let Some(slot) = slot {
            if let Some(answer) = saved_state(self.waited(slot).await) {
                return answer;
            }
        }
        self.stored(Ok(id), owner).await
    }

    /// Whether [`ServerOptions::interrupted_after`] says the fulfilment of
    /// this stored task is gone: still `submitted`/`working`, silent that
    /// long, and not running here.
    /// Also: its lease ([`ServerOptions::lease`]) ran out.
    pub(super) fn abandoned(&self, task: &Task) -> bool {
        if !task.state.is_active() {
            return false;
        }
        let Some(now) = self.host.unix_ms() else {
            return false;
        };
        let silent = match (
            &task.revision.lease,
            self.interrupted_after_ms,
            task.updated_ms,
        ) {
            (Some(_), _, _) => self.lease_expired(task, now),
            (None, Some(after_ms), Some(updated)) => now.saturating_sub(updated) >= after_ms,
            _ => false,
        };
        silent && !self.tasks().is_running(&task.id)
    }

    /// Fails an [`abandoned`](Self::abandoned) task as [`INTERRUPTED`] and
    /// saves it so. Boxed where it is awaited: it is rare, and inlined it
    /// would grow every future that reads a task.
    ///
    /// A compare-and-swap: if the task changed meanwhile (its replica
    /// renewed the lease, another settled it), the stored task is the answer.
    pub(super) async fn fail_abandoned(&self, mut task: Task) -> Result<Task, RpcError> {
        let silent_s = task.updated_ms.map_or(0, |u| {
            self.host.unix_ms().unwrap_or(u).saturating_sub(u) / 1000
        });
        let holder = task.revision.lease.take().map(|l| l.holder);
        mark_interrupted(&mut task, self.host.unix_ms());
        task.revision.version += 1;
        let logged = [machine::status(
            &task,
            task.state,
            task.status_message.clone(),
            task.updated_ms,
        )];
        match self.store.save_with_events(&task, &logged).await {
            Ok(()) => {}
            Err(e) if e.is_conflict() => {
                return match self.store.get(&task.id).await {
                    Ok(Some(stored)) => Ok(stored),
                    Ok(None) => Err(task_not_found(&task.id)),
                    Err(e) => Err(RpcError::internal(format!("the task store failed: {e}"))),
                };
            }
            Err(e) => return Err(not_stored(e.message())),
        }
        self.store_changed(&task.id, Some(task.revision.version));
        self.host.report(&match holder {
            Some(holder) => format!(
                "task {}: the lease of replica {holder} ran out (no progress for {silent_s} s); marked failed",
                task.id
            ),
            None => format!(
                "task {} made no progress for {silent_s} s and is not running here; marked failed",
                task.id
            ),
        });
        Ok(task)
    }

    pub(super) async fn send_message(
        self: &Arc<Self>,
        params: &Value,
        shape: Shape,
        owner: Owner<'_>,
        req: &HttpRequest,
    ) -> Result<Answer, RpcError> {
        let (task, request, blocking, pending, span) =
            self.create_task(params, shape, owner, req).await?;
        let history = params
            .get("configuration")
            .map(|c| validate::history_length(c, "configuration.historyLength"))
            .transpose()?
            .flatten();
        let follow = if blocking { Follow::Wait } else { Follow::None };
        let id = task.id.clone();
        let started = self
            .start(request, task.clone(), follow, pending, span)
            .await?;
        let task = match started.wait {
            Some(slot) => match saved_state(self.waited(slot).await) {
                Some(settled) => settled?,
                // Released without settling (the job was dropped): answer what is stored now.
                None => self.store.get(&id).await.ok().flatten().unwrap_or(task),
            },
            None => task,
        };
        // 1.0 wraps a SendMessage result: `{"task": …}`; 0.3 answers the bare task.
        Ok(Answer {
            wrap: shape == Shape::V10,
            ..Answer::task(task, shape, history)
        })
    }

    /// Validates a SendMessage's params and makes its task (not yet
    /// stored): a new one (submitted), or the task the message names
    /// continued with it (working); what to fulfil; and whether the caller
    /// asked to block. The task's trace is the request's `traceparent`
    /// (a new span of it), else the continued task's own.
    pub(super) async fn create_task(
        self: &Arc<Self>,
        params: &Value,
        shape: Shape,
        owner: Owner<'_>,
        req: &HttpRequest,
    ) -> Result<(Task, FulfilRequest, bool, PendingPush, TaskSpan), RpcError> {
        let msg = validate::check_send(params)?;
        let mut user = Message::from_value(msg)
            .unwrap_or_else(|| Message::agent_text(String::new(), String::new()));
        user.role = Role::User;
        if user.parts.is_empty() {
            return Err(RpcError::invalid_field(
                "message.parts",
                "has no part with content",
            ));
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
        if user.message_id.is_empty() {
            user.message_id = self.host.new_id();
        }
        // Files and data reach a fulfiller that reads text as one line each.
        let mut text = String::new();
        // A plain loop, not an iterator chain (see ARCHITECTURE.md).
        for (i, part) in user.parts.iter().enumerate() {
            if i > 0 {
                text.push('\n');
            }
            text.push_str(&part.describe());
        }
        // Stored without ids of its own: on the wire it carries the task's.
        // Some clients send empty ids for "none" (protobuf defaults).
        let present = |id: Option<String>| id.filter(|s| !s.is_empty());
        let (task_id, context_id) = (
            present(user.task_id.take()),
            present(user.context_id.take()),
        );
        // A context the caller names may have earlier turns; a fresh one has none.
        let read_context = task_id.is_some() || context_id.is_some();
        let caller = crate::TraceContext::from_headers(&req.headers);
        let trace = caller
            .as_ref()
            .map(|caller| Box::new(caller.child(&self.host.new_id())));
        // The parent of the turn's span: the request, or the task's last turn.
        let mut parent = caller.map(|c| c.span_id);
        let mut task = match task_id {
            Some(task_id) => {
                let waiting = self.to_continue(&task_id, owner).await?;
                if let Some(refused) =
                    conversation::refuse_continuation(&waiting, context_id.as_deref())
                {
                    return Err(refused);
                }
                conversation::continued(waiting, user, self.host.unix_ms())
            }
            None => Task {
                id: self.host.new_id(),
                context_id: context_id.unwrap_or_else(|| self.host.new_id()),
                state: TaskState::Submitted,
                status_message: None,
                updated_ms: self.host.unix_ms(),
                artifacts: Vec::new(),
                history: vec![user],
                dialect: shape,
                owner: owner.map(str::to_string),
                trace: None,
                revision: Default::default(),
            },
        };
        match trace {
            Some(trace) => task.trace = Some(trace),
            // A turn with no caller's context continues the task's trace as
            // a span of its own (its model calls then get ids of their own).
            None => {
                if let Some(earlier) = task.trace.take() {
                    parent = Some(earlier.span_id);
                    task.trace = Some(Box::new(earlier.child(&self.host.new_id())));
                }
            }
        }
        let span = match (self.host.span_hook(), &task.trace, parent) {
            (Some(_), Some(trace), Some(parent)) => {
                let mut span = crate::SpanRecord::new(
                    "a2a.task".into(),
                    crate::SpanKind::Internal,
                    crate::TraceContext::clone(trace),
                    parent,
                    self.host.now_ms(),
                );
                span.set("gen_ai.operation.name", "invoke_agent");
                span.set("a2a.task.id", task.id.as_str());
                span.set("a2a.context.id", task.context_id.as_str());
                span.set("gen_ai.conversation.id", task.context_id.as_str());
                Some(Box::new(span))
            }
            _ => None,
        };
        // A continued task's webhook is stored at once; a new one's after
        // the task's first save.
        #[cfg(feature = "push")]
        let pending = {
            let continued = (task.state != TaskState::Submitted).then_some(task.owner.as_deref());
            self.push_on_send(params, &task.id, shape, continued)
                .await?
        };
        #[cfg(not(feature = "push"))]
        let pending = self.push_on_send(params, &task.id, shape)?;
        let history = self.conversation(&task, read_context).await;
        let request = FulfilRequest {
            task_id: task.id.clone(),
            context_id: task.context_id.clone(),
            text,
            skill,
            history,
            trace: task.trace.as_deref().cloned(),
        };
        Ok((task, request, blocking, pending, span))
    }

    /// The turns before `task`'s last message: its earlier turns, after
    /// those of the other tasks of its context in the store (read only
    /// with `read_context`: a fresh context has none).
    pub(super) async fn conversation(&self, task: &Task, read_context: bool) -> Vec<Message> {
        let own = &task.history[..task.history.len().saturating_sub(1)];
        let mut tasks = Vec::new();
        if read_context {
            // The caller's own earlier turns only: a context id another
            // caller also uses reads none of theirs.
            let filter = TaskFilter {
                context_id: Some(task.context_id.clone()),
                owner: task.owner.clone(),
                ..TaskFilter::default()
            };
            // A store that cannot list keeps no memory beyond the task itself.
            if let Ok(Some(found)) = self.store.list(&filter).await {
                tasks = found;
            }
            tasks.retain(|t| t.id != task.id && filter.matches(t));
        }
        let mut turns = context_turns(tasks, MAX_CONTEXT_MESSAGES);
        turns.extend(own.iter().cloned());
        let skip = turns.len().saturating_sub(MAX_CONTEXT_MESSAGES);
        turns.drain(..skip);
        turns
    }

    pub(super) fn fulfil(
        self: &Arc<Self>,
        request: FulfilRequest,
    ) -> BoxFuture<'static, Result<String, String>> {
        let hooks: Arc<dyn stream::Hooks> = self.clone();
        let id = request.task_id.clone();
        self.fulfiller.fulfil(request, Progress::new(hooks, &id))
    }

    /// Reports what a save left to do: a problem, the `on_task` hook.
    pub(super) fn after_save(&self, after: AfterSave) {
        if let Some(problem) = after.problem {
            self.save_failed(&problem);
        }
        if let Some((task, info)) = after.settled {
            self.host.on_task(TaskEvent {
                trace_id: task.trace.as_ref().map(|t| t.trace_id_hex()),
                id: task.id,
                skill: info.skill,
                task: info.text,
                result: info.result,
                state: task.state,
            });
        }
    }
}

/// What a new task's caller follows.
pub(super) enum Follow {
    None,
    /// Its events (SendStreamingMessage).
    Stream,
    /// Its outcome (a blocking SendMessage).
    Wait,
}

#[derive(Default)]
pub(super) struct Started {
    pub(super) stream: Option<(Task, Option<Slot>)>,
    pub(super) wait: Option<Slot>,
}

/// A new task's webhook from its SendMessage, stored after the task's first save.
#[cfg(feature = "push")]
pub(super) type PendingPush = Option<push::PushConfig>;
#[cfg(not(feature = "push"))]
pub(super) type PendingPush = Option<std::convert::Infallible>;

/// PushNotificationNotSupportedError: the card says `pushNotifications: false`.
pub(super) fn push_not_supported() -> RpcError {
    RpcError::new(
        rpc::PUSH_NOTIFICATION_NOT_SUPPORTED,
        "Push notifications are not supported by this agent",
    )
}

/// The error for a state the store did not take: never acknowledged.
pub(super) fn not_stored(e: &str) -> RpcError {
    RpcError::internal(format!("the task's new state could not be stored: {e}"))
}

/// What a waiter heard, as an answer: the task as saved, or the error for
/// a state the store refused; `None` when the job ended without a saved
/// outcome (the caller then reads the store).
pub(super) fn saved_state(waited: Waited) -> Option<Result<Task, RpcError>> {
    match waited {
        Waited::Saved(task) => Some(Ok(task)),
        Waited::SaveFailed(e) => Some(Err(not_stored(&e))),
        Waited::Released => None,
    }
}
