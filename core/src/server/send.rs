//! SendMessage and SendStreamingMessage as a machine: the message checked,
//! its task made (a new one) or read and continued (the task the message
//! answers), the conversation before it read, its turn started, and for a
//! blocking send its outcome awaited. No store, no host, no futures in
//! [`SendMachine`]: each input returns the next [`SendStep`], and
//! [`A2aServer::send`] is its driver. What it needs of the server besides
//! (fresh ids, the clocks, the push options) it asks through [`SendEnv`].

use super::*;

/// What a send needs of its server besides the store: no I/O.
pub(super) trait SendEnv {
    fn new_id(&self) -> String;
    fn now_ms(&self) -> u64;
    fn unix_ms(&self) -> Option<u64>;
    /// Whether the server records spans (a turn then gets one).
    fn spans(&self) -> bool;
    /// The webhook a send's `configuration` names for task `task`,
    /// checked (refused when the server offers no push notifications).
    fn push_on_send(
        &self,
        params: &Value,
        task: &str,
        shape: Shape,
    ) -> Result<PendingPush, RpcError>;
}

/// The webhook a send's `configuration` names, if any:
/// `taskPushNotificationConfig` (0.3: `pushNotificationConfig`).
pub(super) fn sent_webhook(params: &Value) -> Option<&Value> {
    let config = params.get("configuration")?;
    config
        .get("taskPushNotificationConfig")
        .or_else(|| config.get("pushNotificationConfig"))
        .filter(|c| !c.is_null())
}

/// What the machine asks for next.
#[must_use = "a send's step is what it waits for: run it, or the send stalls"]
pub(super) enum SendStep {
    /// Look for the task the message continues among those running here,
    /// then [`SendMachine::handle_running`].
    Running,
    /// Wait on `slot` (the turn running here: its save, or its outcome),
    /// then [`SendMachine::handle_waited`].
    Wait(Slot),
    /// The stored task as the caller may see it ([`A2aServer::stored`]),
    /// then [`SendMachine::handle_stored`].
    Stored(String),
    /// Store the webhook set with a message continuing a task, for its
    /// owner, then [`SendMachine::handle_push`].
    #[cfg(feature = "push")]
    PutPush(push::PushConfig, Option<String>),
    /// The tasks of the context (the caller's earlier turns), matching
    /// [`SendMachine::context`], then [`SendMachine::handle_context`].
    ReadContext,
    /// Start the turn ([`A2aServer::start`]), then [`SendMachine::handle_started`].
    Start(Box<Turn>),
    /// The task as stored now (a blocking send whose job ended without
    /// telling), then [`SendMachine::handle_read`].
    Read(String),
    /// The send is answered (boxed: the other steps are small).
    Done(Result<Box<Sent>, RpcError>),
}

/// A turn to start: what [`A2aServer::start`] takes.
pub(super) struct Turn {
    pub(super) request: FulfilRequest,
    pub(super) task: Task,
    pub(super) follow: Follow,
    pub(super) pending: PendingPush,
    pub(super) span: TaskSpan,
}

/// A send's outcome.
pub(super) enum Sent {
    /// A SendMessage's answer: the task, with the `historyLength` asked.
    Task { task: Task, history: Option<usize> },
    /// A SendStreamingMessage's stream: the task as it started, and the
    /// slot its events are read from.
    Stream { first: Task, slot: Option<Slot> },
}

/// One SendMessage or SendStreamingMessage.
pub(super) struct SendMachine<'a> {
    params: &'a Value,
    shape: Shape,
    owner: Owner<'a>,
    follow: Follow,
    /// Awaiting a blocking send's outcome (else, while waiting: the task to continue).
    awaiting: bool,
    /// Whether the caller named a task or a context (which may have
    /// earlier turns; a fresh one has none), and the filter of those read
    /// ([`SendStep::ReadContext`]).
    named: bool,
    context: Option<TaskFilter>,
    /// The caller's message (until the task holds it).
    user: Option<Message>,
    /// The task the message names, and the context.
    task_id: Option<String>,
    context_id: Option<String>,
    text: String,
    skill: Option<String>,
    /// The caller's trace continued (a new span of its `traceparent`), and
    /// the parent of the turn's span.
    trace: Option<Box<crate::TraceContext>>,
    parent: Option<[u8; 8]>,
    /// The task, once made or continued.
    task: Option<Task>,
    pending: PendingPush,
    span: TaskSpan,
    history: Option<usize>,
}

impl<'a> SendMachine<'a> {
    /// Checks the message of a send (`params`, in `shape`, from `owner`,
    /// whose request had `headers`): a SendStreamingMessage (`streaming`)
    /// follows its task's events, a blocking SendMessage its outcome.
    pub(super) fn new(
        params: &'a Value,
        shape: Shape,
        owner: Owner<'a>,
        headers: &[(String, String)],
        streaming: bool,
        env: &impl SendEnv,
    ) -> Result<SendMachine<'a>, RpcError> {
        // Checks `configuration.historyLength` too: read below without a second check.
        let msg = validate::check_send(params)?;
        let config = params.get("configuration");
        let history = config
            .and_then(|c| validate::history_length(c, "configuration.historyLength").ok())
            .flatten();
        let flag = |k: &str| config.and_then(|c| c.get(k)).and_then(Value::as_bool);
        // 1.0 blocks unless returnImmediately; 0.3 blocks unless blocking:false.
        let follow = if streaming {
            Follow::Stream
        } else if flag("returnImmediately") == Some(true) || flag("blocking") == Some(false) {
            Follow::None
        } else {
            Follow::Wait
        };
        let mut user = Message::from_value(msg)
            .unwrap_or_else(|| Message::agent_text(String::new(), String::new()));
        user.role = Role::User;
        if user.parts.is_empty() {
            return Err(RpcError::invalid_field(
                "message.parts",
                "has no part with content",
            ));
        }
        let skill = msg
            .get("metadata")
            .and_then(|m| m.get("skill"))
            .and_then(Value::as_str)
            .map(str::to_string);
        if user.message_id.is_empty() {
            user.message_id = env.new_id();
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
        let caller = crate::TraceContext::from_headers(headers);
        let trace = caller
            .as_ref()
            .map(|caller| Box::new(caller.child(&env.new_id())));
        Ok(SendMachine {
            params,
            shape,
            owner,
            follow,
            awaiting: false,
            named: task_id.is_some() || context_id.is_some(),
            context: None,
            user: Some(user),
            task_id,
            context_id,
            text,
            skill,
            trace,
            // The parent of the turn's span: the request, or the task's last turn.
            parent: caller.map(|c| c.span_id),
            task: None,
            pending: None,
            span: None,
            history,
        })
    }

    /// The first step: a new task is made; the task a message continues
    /// is looked for among those running here.
    pub(super) fn begin(&mut self, env: &impl SendEnv) -> SendStep {
        if self.task_id.is_none() {
            let user = self.user.take();
            let task = Task {
                id: env.new_id(),
                context_id: self.context_id.take().unwrap_or_else(|| env.new_id()),
                state: TaskState::Submitted,
                status_message: None,
                updated_ms: env.unix_ms(),
                artifacts: Vec::new(),
                history: user.into_iter().collect(),
                dialect: self.shape,
                owner: self.owner.map(str::to_string),
                trace: None,
                revision: Default::default(),
            };
            return self.made(task, env);
        }
        SendStep::Running
    }

    /// The task a message continues, read as its caller last heard of it.
    /// A stream tells of a state as it happens and the store a moment
    /// later, so a task whose question or outcome is decided here but
    /// still being saved is waited for; one still working is refused as
    /// such; any other is read from the store.
    pub(super) fn handle_running(&mut self, tasks: &mut Tasks, env: &impl SendEnv) -> SendStep {
        let id = self.task_id.as_deref().unwrap_or_default();
        let slot = match tasks.task(id) {
            Some(task) if !visible(task, self.owner) => {
                return SendStep::Done(Err(task_not_found(id)))
            }
            Some(task) if !machine::ends_stream(task.state) => {
                let task = task.clone();
                return self.handle_stored(Ok(task), env);
            }
            Some(_) => tasks.wait(id, Until::Stops),
            None => None,
        };
        match slot {
            Some(slot) => SendStep::Wait(slot),
            None => SendStep::Stored(id.to_string()),
        }
    }

    /// What the task's turn running here came to: its save (the task to
    /// continue), or the outcome of a blocking send.
    pub(super) fn handle_waited(&mut self, waited: Waited, env: &impl SendEnv) -> SendStep {
        let id = || self.task_id.clone().unwrap_or_default();
        match (saved_state(waited), self.awaiting) {
            (Some(task), false) => self.handle_stored(task, env),
            (Some(Ok(task)), true) => self.answer(task),
            (Some(Err(e)), true) => SendStep::Done(Err(e)),
            (None, false) => SendStep::Stored(id()),
            // Released without settling (the job was dropped): answer what is stored now.
            (None, true) => SendStep::Read(id()),
        }
    }

    /// The stored task the message continues, as its caller may see it.
    pub(super) fn handle_stored(
        &mut self,
        stored: Result<Task, RpcError>,
        env: &impl SendEnv,
    ) -> SendStep {
        let waiting = match stored {
            Ok(task) => task,
            Err(e) => return SendStep::Done(Err(e)),
        };
        if let Some(refused) =
            conversation::refuse_continuation(&waiting, self.context_id.as_deref())
        {
            return SendStep::Done(Err(refused));
        }
        let Some(user) = self.user.take() else {
            return SendStep::Done(Err(RpcError::internal("the message was taken".into())));
        };
        let task = conversation::continued(waiting, user, env.unix_ms());
        self.made(task, env)
    }

    /// The task of the turn is made: its trace and span, its webhook.
    fn made(&mut self, mut task: Task, env: &impl SendEnv) -> SendStep {
        match self.trace.take() {
            Some(trace) => task.trace = Some(trace),
            // A turn with no caller's context continues the task's trace as
            // a span of its own (its model calls then get ids of their own).
            None => {
                if let Some(earlier) = task.trace.take() {
                    self.parent = Some(earlier.span_id);
                    task.trace = Some(Box::new(earlier.child(&env.new_id())));
                }
            }
        }
        if let (true, Some(trace), Some(parent)) = (env.spans(), &task.trace, self.parent) {
            let mut span = crate::SpanRecord::new(
                "a2a.task".into(),
                crate::SpanKind::Internal,
                crate::TraceContext::clone(trace),
                parent,
                env.now_ms(),
            );
            span.set("gen_ai.operation.name", "invoke_agent");
            span.set("a2a.task.id", task.id.as_str());
            span.set("a2a.context.id", task.context_id.as_str());
            span.set("gen_ai.conversation.id", task.context_id.as_str());
            self.span = Some(Box::new(span));
        }
        let pending = match env.push_on_send(self.params, &task.id, self.shape) {
            Ok(pending) => pending,
            Err(e) => return SendStep::Done(Err(e)),
        };
        // A continued task's webhook is stored at once; a new one's after
        // the task's first save.
        #[cfg(feature = "push")]
        let pending = match (task.state != TaskState::Submitted, pending) {
            (true, Some(config)) => {
                let owner = task.owner.clone();
                self.task = Some(task);
                return SendStep::PutPush(config, owner);
            }
            (_, pending) => pending,
        };
        self.task = Some(task);
        self.pending = pending;
        self.read_context()
    }

    /// A continued task's webhook is stored (or refused).
    #[cfg(feature = "push")]
    pub(super) fn handle_push(&mut self, put: Result<(), RpcError>) -> SendStep {
        match put {
            Ok(()) => self.read_context(),
            Err(e) => SendStep::Done(Err(e)),
        }
    }

    /// A context the caller names may have earlier turns; a fresh one has none.
    fn read_context(&mut self) -> SendStep {
        let Some(task) = self.task.as_ref().filter(|_| self.named) else {
            return self.handle_context(None);
        };
        // The caller's own earlier turns only: a context id another caller
        // also uses reads none of theirs.
        let filter = TaskFilter {
            context_id: Some(task.context_id.clone()),
            owner: task.owner.clone(),
            ..TaskFilter::default()
        };
        self.context = Some(filter);
        SendStep::ReadContext
    }

    /// The context's tasks to read while [`SendStep::ReadContext`] is the step.
    pub(super) fn context(&self) -> Option<&TaskFilter> {
        self.context.as_ref()
    }

    /// The tasks of the context (`None`: none, or a store that cannot
    /// list, which keeps no memory beyond the task itself): the turns
    /// before the task's last message, then the turn starts.
    pub(super) fn handle_context(&mut self, found: Option<Vec<Task>>) -> SendStep {
        let Some(task) = self.task.take() else {
            return SendStep::Done(Err(RpcError::internal("the task was taken".into())));
        };
        let mut tasks = found.unwrap_or_default();
        match &self.context {
            Some(filter) => tasks.retain(|t| t.id != task.id && filter.matches(t)),
            None => tasks.clear(),
        }
        let own = &task.history[..task.history.len().saturating_sub(1)];
        let mut turns = context_turns(tasks, MAX_CONTEXT_MESSAGES);
        turns.extend(own.iter().cloned());
        let skip = turns.len().saturating_sub(MAX_CONTEXT_MESSAGES);
        turns.drain(..skip);
        let follow = self.follow;
        let request = FulfilRequest {
            task_id: task.id.clone(),
            context_id: task.context_id.clone(),
            text: std::mem::take(&mut self.text),
            skill: self.skill.take(),
            history: turns,
            trace: task.trace.as_deref().cloned(),
        };
        // A blocking send may answer with the task as the turn began; a
        // stream answers with the task its start gives.
        if !self.streaming() {
            self.task_id = Some(task.id.clone());
            self.task = Some(task.clone());
        }
        SendStep::Start(Box::new(Turn {
            request,
            task,
            follow,
            pending: self.pending.take(),
            span: self.span.take(),
        }))
    }

    /// The turn started (or was refused): a blocking send awaits its outcome.
    pub(super) fn handle_started(&mut self, started: Result<Started, RpcError>) -> SendStep {
        let started = match started {
            Ok(started) => started,
            Err(e) => return SendStep::Done(Err(e)),
        };
        if self.streaming() {
            return SendStep::Done(match started.stream {
                Some((first, slot)) => Ok(Box::new(Sent::Stream { first, slot })),
                None => Err(RpcError::internal("the task ended at once".into())),
            });
        }
        match started.wait {
            Some(slot) => {
                self.awaiting = true;
                SendStep::Wait(slot)
            }
            None => match self.task.take() {
                Some(task) => self.answer(task),
                None => SendStep::Done(Err(RpcError::internal("no task".into()))),
            },
        }
    }

    /// The task as stored after a blocking send's job ended without
    /// telling (`None`: the task as the turn began).
    pub(super) fn handle_read(&mut self, stored: Option<Task>) -> SendStep {
        match stored.or_else(|| self.task.take()) {
            Some(task) => self.answer(task),
            None => SendStep::Done(Err(RpcError::internal("no task".into()))),
        }
    }

    /// A SendStreamingMessage: it answers with the stream its start gives.
    fn streaming(&self) -> bool {
        matches!(self.follow, Follow::Stream)
    }

    fn answer(&mut self, task: Task) -> SendStep {
        SendStep::Done(Ok(Box::new(Sent::Task {
            task,
            history: self.history,
        })))
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> SendEnv for A2aServer<S, H, F> {
    fn new_id(&self) -> String {
        self.host.new_id()
    }
    fn now_ms(&self) -> u64 {
        self.host.now_ms()
    }
    fn unix_ms(&self) -> Option<u64> {
        self.host.unix_ms()
    }
    fn spans(&self) -> bool {
        self.host.span_hook().is_some()
    }
    fn push_on_send(
        &self,
        params: &Value,
        task: &str,
        shape: Shape,
    ) -> Result<PendingPush, RpcError> {
        A2aServer::push_on_send(self, params, task, shape)
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// Sends a message (`streaming`: SendStreamingMessage): the driver of a
    /// [`SendMachine`].
    pub(super) async fn send(
        self: &Arc<Self>,
        io: &Io<H>,
        params: &Value,
        shape: Shape,
        owner: Owner<'_>,
        req: &HttpRequest,
        streaming: bool,
    ) -> Result<Box<Sent>, RpcError> {
        let env = &**self;
        let mut send = SendMachine::new(params, shape, owner, &req.headers, streaming, env)?;
        let mut step = send.begin(env);
        loop {
            step = match step {
                SendStep::Running => send.handle_running(&mut self.tasks(), env),
                SendStep::Wait(slot) => {
                    let waited = self.waited(io, slot).await;
                    send.handle_waited(waited, env)
                }
                SendStep::Stored(id) => {
                    let stored = self.stored(io, Ok(&id), owner).await;
                    send.handle_stored(stored.map(Arc::unwrap_or_clone), env)
                }
                #[cfg(feature = "push")]
                SendStep::PutPush(config, owner) => {
                    let put = self.put_push(io, config, owner.as_deref()).await;
                    send.handle_push(put)
                }
                SendStep::ReadContext => {
                    let found = match send.context() {
                        Some(filter) => io.list(filter.clone()).await.ok().flatten(),
                        None => None,
                    };
                    send.handle_context(found)
                }
                SendStep::Start(turn) => {
                    let Turn {
                        request,
                        task,
                        follow,
                        pending,
                        span,
                    } = *turn;
                    let started = self.start(io, request, task, follow, pending, span).await;
                    send.handle_started(started)
                }
                SendStep::Read(id) => {
                    let stored = io.get(&id).await;
                    send.handle_read(stored.ok().flatten())
                }
                SendStep::Done(sent) => return sent,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    //! The send machine alone: its steps for given reads and waits, with
    //! no store and no host.
    use super::machine::tests::task;
    use super::*;
    use serde_json::json;
    use std::cell::Cell;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    /// Ids `id1`, `id2`, …; the clock at 5; push notifications offered
    /// when `push`.
    struct Env {
        ids: Cell<u32>,
        push: bool,
    }

    fn env(push: bool) -> Env {
        Env {
            ids: Cell::new(0),
            push,
        }
    }

    impl SendEnv for Env {
        fn new_id(&self) -> String {
            self.ids.set(self.ids.get() + 1);
            format!("id{}", self.ids.get())
        }
        fn now_ms(&self) -> u64 {
            5
        }
        fn unix_ms(&self) -> Option<u64> {
            Some(5)
        }
        fn spans(&self) -> bool {
            false
        }
        fn push_on_send(
            &self,
            params: &Value,
            task: &str,
            shape: Shape,
        ) -> Result<PendingPush, RpcError> {
            match sent_webhook(params) {
                None => Ok(None),
                #[cfg(feature = "push")]
                Some(c) if self.push => Ok(Some(
                    push::PushConfig::from_value(c, task, shape).expect("config"),
                )),
                Some(_) => {
                    let _ = (task, shape, self.push);
                    Err(push_not_supported())
                }
            }
        }
    }

    fn message(extra: Value) -> Value {
        let mut m = json!({"role": "user", "messageId": "m1",
            "parts": [{"kind": "text", "text": "hi"}]});
        if let (Some(m), Some(extra)) = (m.as_object_mut(), extra.as_object()) {
            m.extend(extra.clone());
        }
        m
    }

    fn turn(step: SendStep) -> Turn {
        match step {
            SendStep::Start(turn) => *turn,
            _ => panic!("expected the turn to start"),
        }
    }

    /// The task a SendMessage answers with.
    fn done(step: SendStep) -> Result<Task, RpcError> {
        match step {
            SendStep::Done(sent) => sent.map(|sent| match *sent {
                Sent::Task { task, .. } => task,
                Sent::Stream { .. } => panic!("expected a task, not a stream"),
            }),
            _ => panic!("expected the answer"),
        }
    }

    /// The first steps of a message continuing a task: it is looked for
    /// among the tasks running here (`tasks`).
    fn continuing(m: &mut SendMachine<'_>, tasks: &mut Tasks, env: &Env) -> SendStep {
        assert!(matches!(m.begin(env), SendStep::Running));
        m.handle_running(tasks, env)
    }

    /// `task(id)` waiting for input, in context `c`, with one earlier turn.
    fn asking(id: &str) -> Task {
        let mut t = task(id);
        t.state = TaskState::InputRequired;
        t.history = vec![Message::agent_text("q1".into(), format!("{id}?"))];
        t
    }

    #[test]
    fn a_blocking_send_makes_a_submitted_task_starts_it_and_answers_its_outcome() {
        let env = env(false);
        let params = json!({"message": message(json!({}))});
        let mut m = SendMachine::new(&params, Shape::V03, None, &[], false, &env).expect("ok");
        let turn = turn(m.begin(&env));
        assert_eq!(
            (turn.task.id.as_str(), turn.task.context_id.as_str()),
            ("id1", "id2")
        );
        assert_eq!(turn.task.state, TaskState::Submitted);
        assert!(matches!(turn.follow, Follow::Wait));
        assert_eq!(turn.request.text, "hi");
        assert!(
            turn.request.history.is_empty(),
            "a fresh context has no turns"
        );
        let started = Started {
            stream: None,
            wait: Some(7),
        };
        assert!(matches!(m.handle_started(Ok(started)), SendStep::Wait(7)));
        let mut outcome = turn.task.clone();
        outcome.state = TaskState::Completed;
        let sent = done(m.handle_waited(Waited::Saved(outcome), &env)).expect("sent");
        assert_eq!(sent.state, TaskState::Completed);
    }

    #[test]
    fn a_blocking_send_whose_job_was_dropped_answers_the_stored_task() {
        let env = env(false);
        let params = json!({"message": message(json!({}))});
        let mut m = SendMachine::new(&params, Shape::V03, None, &[], false, &env).expect("ok");
        let _ = turn(m.begin(&env));
        let started = Started {
            stream: None,
            wait: Some(1),
        };
        let _ = m.handle_started(Ok(started));
        let SendStep::Read(id) = m.handle_waited(Waited::Released, &env) else {
            panic!("expected a read of the stored task");
        };
        assert_eq!(id, "id1");
        let sent = done(m.handle_read(None)).expect("the task as it began");
        assert_eq!(sent.state, TaskState::Submitted);
    }

    #[test]
    fn an_answer_reads_the_stored_task_continues_it_with_its_context_and_returns_at_once() {
        let (env, mut tasks) = (env(false), Tasks::default());
        let params = json!({"message": message(json!({"taskId": "t1"})),
            "configuration": {"returnImmediately": true}});
        let mut m = SendMachine::new(&params, Shape::V10, None, &[], false, &env).expect("ok");
        let SendStep::Stored(id) = continuing(&mut m, &mut tasks, &env) else {
            panic!("expected a read of the stored task");
        };
        assert_eq!(id, "t1");
        let SendStep::ReadContext = m.handle_stored(Ok(asking("t1")), &env) else {
            panic!("expected the context's turns to be read");
        };
        let filter = m.context().expect("the context's filter");
        assert_eq!(filter.context_id.as_deref(), Some("c"));
        // An earlier task of the context, another context's, and the task itself.
        let mut earlier = asking("t0");
        earlier.state = TaskState::Completed;
        let mut elsewhere = asking("x");
        elsewhere.context_id = "other".into();
        let turn = turn(m.handle_context(Some(vec![earlier, elsewhere, asking("t1")])));
        assert_eq!(turn.task.state, TaskState::Working);
        assert!(matches!(turn.follow, Follow::None));
        let texts: Vec<_> = turn
            .request
            .history
            .iter()
            .filter_map(|m| m.parts.first().map(|p| p.describe()))
            .collect();
        assert_eq!(
            texts,
            ["t0?", "t1?"],
            "the context's turn, then the task's question"
        );
        let sent = done(m.handle_started(Ok(Started::default()))).expect("sent");
        assert_eq!(sent.state, TaskState::Working);
    }

    #[test]
    fn an_answer_to_a_task_working_here_is_refused_and_another_callers_is_not_found() {
        let (env, mut tasks) = (env(false), Tasks::default());
        let mut running = task("t1");
        running.owner = Some("alice".into());
        assert!(tasks.start(running, "a1".into(), None, "hi".into()));
        let _ = tasks.saved(task("t1"), Ok(()));
        let params = json!({"message": message(json!({"taskId": "t1"}))});
        let mut m =
            SendMachine::new(&params, Shape::V03, Some("bob"), &[], false, &env).expect("ok");
        let refused = done(continuing(&mut m, &mut tasks, &env)).expect_err("refused");
        assert_eq!(refused.code, rpc::TASK_NOT_FOUND);
        let mut m = SendMachine::new(&params, Shape::V03, None, &[], false, &env).expect("ok");
        let refused = done(continuing(&mut m, &mut tasks, &env)).expect_err("refused");
        assert!(
            refused.message.contains("takes a message only while"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn bad_sends_are_refused_before_anything_starts() {
        let env = env(false);
        let empty = json!({"message": {"role": "user", "messageId": "m", "parts": []}});
        assert!(SendMachine::new(&empty, Shape::V03, None, &[], false, &env).is_err());
        // A webhook on an agent without push notifications.
        let hook = json!({"message": message(json!({})),
            "configuration": {"pushNotificationConfig": {"url": "https://h.example/x"}}});
        let mut m = SendMachine::new(&hook, Shape::V03, None, &[], false, &env).expect("ok");
        let refused = done(m.begin(&env)).expect_err("refused");
        assert_eq!(refused.code, rpc::PUSH_NOTIFICATION_NOT_SUPPORTED);
        let history = json!({"message": message(json!({})),
            "configuration": {"historyLength": -1}});
        assert!(SendMachine::new(&history, Shape::V03, None, &[], false, &env).is_err());
    }

    #[cfg(feature = "push")]
    #[test]
    fn a_webhook_sent_with_an_answer_is_stored_before_the_turn_and_a_new_tasks_after() {
        let (env, mut tasks) = (env(true), Tasks::default());
        let hook = json!({"url": "https://h.example/x"});
        let params = json!({"message": message(json!({"taskId": "t1"})),
            "configuration": {"pushNotificationConfig": hook}});
        let mut m = SendMachine::new(&params, Shape::V03, None, &[], false, &env).expect("ok");
        let _ = continuing(&mut m, &mut tasks, &env);
        let mut asked = asking("t1");
        asked.owner = Some("alice".into());
        let SendStep::PutPush(config, owner) = m.handle_stored(Ok(asked), &env) else {
            panic!("expected the webhook to be stored");
        };
        assert_eq!(
            (config.task_id.as_str(), owner.as_deref()),
            ("t1", Some("alice"))
        );
        assert!(matches!(m.handle_push(Ok(())), SendStep::ReadContext));
        let params = json!({"message": message(json!({})),
            "configuration": {"pushNotificationConfig": hook}});
        let mut m = SendMachine::new(&params, Shape::V03, None, &[], false, &env).expect("ok");
        let turn = turn(m.begin(&env));
        assert!(turn.pending.is_some(), "stored after the task's first save");
    }
}
