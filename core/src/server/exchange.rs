//! The server as a machine of the client's shape: a request in
//! ([`A2aServer::handle_request`]), then what it needs next out
//! ([`Exchange::poll_output`]): a call on the task store, a token or a
//! request for the host's verifiers, a wait on a running task or a timer,
//! and last the answer. Each output is answered by one input
//! ([`Exchange::handle_store`], [`Exchange::handle_jwt`],
//! [`Exchange::handle_verdict`], [`Exchange::handle_woken`] and its
//! shorthands [`Exchange::handle_store_change`] and
//! [`Exchange::handle_timeout`]).
//!
//! An exchange does no I/O and holds no waker: it runs only inside
//! `poll_output`, and between two outputs it waits for nothing but its next
//! input. [`A2aServer::serve`] is one driver of it (the store through
//! [`StoreCall::perform`], the host's verifiers and timers, the running
//! tasks through [`A2aServer::wait`]); a test is another, answering each
//! output by hand.
//!
//! Inside, each request flow is written as straight-line code over the
//! flow machines (the read, send, start, cancel, list, config, subscribe,
//! long-poll and authentication machines); its every wait goes through the
//! exchange's port, so a flow's position between two outputs is the state
//! the compiler keeps for it.

use super::*;
use crate::host::lock::Lock;
use futures_util::FutureExt;

/// One call a request makes on the task store: the host runs it
/// ([`StoreCall::perform`]) and hands what it gave to
/// [`Exchange::handle_store`].
#[derive(Debug)]
pub enum StoreCall {
    /// [`TaskStore::get_shared`]: a task read (one the request changes
    /// is taken from the `Arc` the store gives).
    GetShared(String),
    /// [`TaskStore::save_with_events`]: a compare-and-swap over the
    /// version before the task's, with the events that led to it.
    Save {
        task: Arc<Task>,
        events: Vec<StreamEvent>,
    },
    /// [`TaskStore::list`].
    List(TaskFilter),
    /// [`TaskStore::list_page`].
    ListPage {
        filter: TaskFilter,
        after: Option<(u64, String)>,
        limit: usize,
    },
    /// [`TaskStore::get_push_configs`].
    #[cfg(feature = "push")]
    GetPushConfigs(String),
    /// [`TaskStore::put_push_config`].
    #[cfg(feature = "push")]
    PutPushConfig {
        task_id: String,
        config: Value,
        max: usize,
    },
    /// [`TaskStore::delete_push_config`].
    #[cfg(feature = "push")]
    DeletePushConfig { task_id: String, id: String },
}

/// What a [`StoreCall`] gave, for [`Exchange::handle_store`].
// Made and consumed once per call: boxing the task would cost an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum StoreDone {
    /// What [`StoreCall::GetShared`] read.
    Shared(Result<Option<Arc<Task>>, StoreError>),
    /// Whether [`StoreCall::Save`] stored the task.
    Saved(Result<(), StoreError>),
    /// What [`StoreCall::List`] found.
    Tasks(Result<Option<Vec<Task>>, StoreError>),
    /// What [`StoreCall::ListPage`] found.
    Page(Result<Option<(Vec<Task>, usize)>, StoreError>),
    /// What [`StoreCall::GetPushConfigs`] read.
    #[cfg(feature = "push")]
    Configs(Result<Option<Value>, StoreError>),
    /// Whether a [`StoreCall::PutPushConfig`] or
    /// [`StoreCall::DeletePushConfig`] changed anything.
    #[cfg(feature = "push")]
    Changed(Result<bool, StoreError>),
}

impl StoreCall {
    /// Runs this call on `store`. Every call but a shared read is boxed:
    /// a request's driver holds this future, and GetTask's is the one
    /// worth keeping small (hosts move it whole).
    pub async fn perform<S: TaskStore>(self, store: &S) -> StoreDone {
        match self {
            StoreCall::GetShared(id) => StoreDone::Shared(store.get_shared(&id).await),
            StoreCall::Save { task, events } => {
                StoreDone::Saved(Box::pin(store.save_with_events(&task, &events)).await)
            }
            StoreCall::List(filter) => StoreDone::Tasks(Box::pin(store.list(&filter)).await),
            StoreCall::ListPage {
                filter,
                after,
                limit,
            } => {
                let after = after.as_ref().map(|(ms, id)| (*ms, id.as_str()));
                StoreDone::Page(Box::pin(store.list_page(&filter, after, limit)).await)
            }
            #[cfg(feature = "push")]
            StoreCall::GetPushConfigs(id) => {
                StoreDone::Configs(Box::pin(store.get_push_configs(&id)).await)
            }
            #[cfg(feature = "push")]
            StoreCall::PutPushConfig {
                task_id,
                config,
                max,
            } => StoreDone::Changed(Box::pin(store.put_push_config(&task_id, &config, max)).await),
            #[cfg(feature = "push")]
            StoreCall::DeletePushConfig { task_id, id } => {
                StoreDone::Changed(Box::pin(store.delete_push_config(&task_id, &id)).await)
            }
        }
    }
}

/// The error a flow gets when the host answered its store call with the
/// result of another kind of call.
fn mismatch() -> StoreError {
    StoreError::new("the host answered a store call with another call's result")
}

impl StoreDone {
    fn shared(self) -> Result<Option<Arc<Task>>, StoreError> {
        match self {
            StoreDone::Shared(read) => read,
            _ => Err(mismatch()),
        }
    }

    fn saved(self) -> Result<(), StoreError> {
        match self {
            StoreDone::Saved(saved) => saved,
            _ => Err(mismatch()),
        }
    }

    fn tasks(self) -> Result<Option<Vec<Task>>, StoreError> {
        match self {
            StoreDone::Tasks(found) => found,
            _ => Err(mismatch()),
        }
    }

    fn page(self) -> Result<Option<(Vec<Task>, usize)>, StoreError> {
        match self {
            StoreDone::Page(found) => found,
            _ => Err(mismatch()),
        }
    }

    #[cfg(feature = "push")]
    fn configs(self) -> Result<Option<Value>, StoreError> {
        match self {
            StoreDone::Configs(found) => found,
            _ => Err(mismatch()),
        }
    }

    #[cfg(feature = "push")]
    fn changed(self) -> Result<bool, StoreError> {
        match self {
            StoreDone::Changed(changed) => changed,
            _ => Err(mismatch()),
        }
    }
}

/// What a request waits for ([`A2aServer::wait`]): the saved state of a
/// task running here, a change of a stored task running elsewhere, the end
/// of the caller's wait, the next look at the store; whichever comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    waiter: Option<Slot>,
    watch: Option<Slot>,
    /// The caller's wait ends: [`Exchange::handle_timeout`] with this time.
    until_ms: Option<u64>,
    /// The next look at the store: [`Exchange::handle_timeout`] with the time then.
    poll_ms: Option<u64>,
}

impl Wait {
    /// A task's saved state, with no timer.
    fn on(waiter: Slot) -> Wait {
        Wait {
            waiter: Some(waiter),
            watch: None,
            until_ms: None,
            poll_ms: None,
        }
    }

    /// A long-poll's wait: the saved state on `waiter`, a change told on
    /// `watch`, the caller's wait ending at `until_ms`, a look at the store
    /// at `poll_ms`.
    pub(super) fn long_poll(
        waiter: Option<Slot>,
        watch: Option<Slot>,
        until_ms: u64,
        poll_ms: Option<u64>,
    ) -> Wait {
        Wait {
            waiter,
            watch,
            until_ms: Some(until_ms),
            poll_ms,
        }
    }

    /// The earliest time this wait ends by itself (host time,
    /// [`HostBase::now_ms`](crate::HostBase::now_ms)), if any: a host
    /// without [`A2aServer::wait`] calls [`Exchange::handle_timeout`] then.
    pub fn until_ms(&self) -> Option<u64> {
        match (self.until_ms, self.poll_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// What ended a [`Wait`], for [`Exchange::handle_woken`].
#[derive(Debug)]
pub struct Woken(Woke);

// Made and consumed once per wake-up (as `Waited` itself).
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(super) enum Woke {
    Waited(Waited),
    Changed,
    Timeout(u64),
}

/// What a request needs next ([`Exchange::poll_output`]); `T` is what it
/// answers ([`Reply`] for an HTTP request).
#[must_use = "an exchange's output is what it waits for: answer it, or the request stalls"]
pub enum Output<T = Reply> {
    /// Run this on the store ([`StoreCall::perform`]), then
    /// [`Exchange::handle_store`].
    Store(StoreCall),
    /// Check this JWT's signature ([`ServerHost::verify_jwt`]), then
    /// [`Exchange::handle_jwt`].
    VerifyJwt(String),
    /// Run the host's own verifier on the request (the future
    /// [`ServerHost::authenticate`] gave), then [`Exchange::handle_verdict`].
    Authenticate(BoxFuture<'static, auth::Verdict>),
    /// Wait ([`A2aServer::wait`]), then [`Exchange::handle_woken`].
    Wait(Wait),
    /// The answer: the exchange is over.
    Respond(T),
}

/// Shows no token.
impl<T> std::fmt::Debug for Output<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Output::Store(call) => f.debug_tuple("Store").field(call).finish(),
            Output::VerifyJwt(_) => f.write_str("VerifyJwt(..)"),
            Output::Authenticate(_) => f.write_str("Authenticate(..)"),
            Output::Wait(wait) => f.debug_tuple("Wait").field(wait).finish(),
            Output::Respond(_) => f.write_str("Respond(..)"),
        }
    }
}

impl<T> From<Ask> for Output<T> {
    fn from(ask: Ask) -> Output<T> {
        match ask {
            Ask::Store(call) => Output::Store(call),
            Ask::Jwt(token) => Output::VerifyJwt(token),
            Ask::Verdict(verdict) => Output::Authenticate(verdict),
            Ask::Wait(wait) => Output::Wait(wait),
        }
    }
}

/// An output the flow asked for, until the exchange hands it out.
enum Ask {
    Store(StoreCall),
    Jwt(String),
    Verdict(BoxFuture<'static, auth::Verdict>),
    Wait(Wait),
}

/// An input, until the flow takes it.
pub(super) enum Input {
    Store(StoreDone),
    Jwt(Result<auth::Claims, String>),
    Verdict(auth::Verdict),
    Woken(Woke),
}

/// Where a flow and its exchange meet: the output asked, the input given.
#[derive(Default)]
pub(super) struct Port {
    ask: Option<Ask>,
    /// An output was handed out and its input not yet given.
    asked: bool,
    input: Option<Input>,
}

type PortLock<H> = <<H as ServerHost>::Locks as Locks>::Lock<Port>;

/// A flow's side of the port.
pub(super) struct Io<H: ServerHost> {
    port: Arc<PortLock<H>>,
}

impl<H: ServerHost> Io<H> {
    /// Asks for `ask` and gives the input that answers it.
    fn ask(&self, ask: Ask) -> Asked<'_, H> {
        Asked {
            port: &self.port,
            ask: Some(ask),
        }
    }

    /// Runs `call` on the store; `take` reads its result.
    fn store<R: 'static>(
        &self,
        call: StoreCall,
        take: fn(StoreDone) -> Result<R, StoreError>,
    ) -> impl Future<Output = Result<R, StoreError>> + '_ {
        self.ask(Ask::Store(call)).map(move |input| match input {
            Input::Store(done) => take(done),
            _ => Err(mismatch()),
        })
    }

    /// The task `id`, to change.
    pub(super) fn get(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<Task>, StoreError>> + '_ {
        self.get_shared(id)
            .map(|read| read.map(|task| task.map(Arc::unwrap_or_clone)))
    }

    /// The task `id`, shared, to read.
    pub(super) fn get_shared(
        &self,
        id: &str,
    ) -> impl Future<Output = Result<Option<Arc<Task>>, StoreError>> + '_ {
        self.store(StoreCall::GetShared(id.into()), StoreDone::shared)
    }

    /// Saves `task` with `events` (compare-and-swap); the task comes back.
    pub(super) fn save(
        &self,
        task: Task,
        events: Vec<StreamEvent>,
    ) -> impl Future<Output = (Task, Result<(), StoreError>)> + '_ {
        let task = Arc::new(task);
        let call = StoreCall::Save {
            task: task.clone(),
            events,
        };
        // The host has let go of its copy by then: no clone.
        self.store(call, StoreDone::saved)
            .map(move |saved| (Arc::unwrap_or_clone(task), saved))
    }

    pub(super) fn list(
        &self,
        filter: TaskFilter,
    ) -> impl Future<Output = Result<Option<Vec<Task>>, StoreError>> + '_ {
        self.store(StoreCall::List(filter), StoreDone::tasks)
    }

    pub(super) fn list_page(
        &self,
        filter: TaskFilter,
        after: Option<(u64, String)>,
        limit: usize,
    ) -> impl Future<Output = Result<Option<(Vec<Task>, usize)>, StoreError>> + '_ {
        let call = StoreCall::ListPage {
            filter,
            after,
            limit,
        };
        self.store(call, StoreDone::page)
    }

    #[cfg(feature = "push")]
    pub(super) fn push_configs(
        &self,
        task_id: &str,
    ) -> impl Future<Output = Result<Option<Value>, StoreError>> + '_ {
        self.store(
            StoreCall::GetPushConfigs(task_id.into()),
            StoreDone::configs,
        )
    }

    #[cfg(feature = "push")]
    pub(super) fn put_push_config(
        &self,
        task_id: &str,
        config: Value,
        max: usize,
    ) -> impl Future<Output = Result<bool, StoreError>> + '_ {
        let call = StoreCall::PutPushConfig {
            task_id: task_id.into(),
            config,
            max,
        };
        self.store(call, StoreDone::changed)
    }

    #[cfg(feature = "push")]
    pub(super) fn delete_push_config(
        &self,
        task_id: &str,
        id: String,
    ) -> impl Future<Output = Result<bool, StoreError>> + '_ {
        let call = StoreCall::DeletePushConfig {
            task_id: task_id.into(),
            id,
        };
        self.store(call, StoreDone::changed)
    }

    /// The claims of a JWT whose signature the host checked.
    pub(super) fn verify_jwt(
        &self,
        token: &str,
    ) -> impl Future<Output = Result<auth::Claims, String>> + '_ {
        self.ask(Ask::Jwt(token.into())).map(|input| match input {
            Input::Jwt(verified) => verified,
            _ => Err("the host gave no verification of the token".into()),
        })
    }

    /// The verdict of the host's own verifier.
    pub(super) fn verdict(
        &self,
        verdict: BoxFuture<'static, auth::Verdict>,
    ) -> impl Future<Output = auth::Verdict> + '_ {
        self.ask(Ask::Verdict(verdict)).map(|input| match input {
            Input::Verdict(verdict) => verdict,
            _ => auth::Verdict::Rejected {
                status: 401,
                reason: "the host gave no verdict".into(),
            },
        })
    }

    /// What ended `wait`.
    pub(super) fn wait(&self, wait: Wait) -> impl Future<Output = Woke> + '_ {
        self.ask(Ask::Wait(wait)).map(|input| match input {
            Input::Woken(woke) => woke,
            // A wait answered with something else is over: read again.
            _ => Woke::Changed,
        })
    }

    /// The saved state of the task on `waiter`.
    pub(super) fn waited(&self, waiter: Slot) -> impl Future<Output = Waited> + '_ {
        self.wait(Wait::on(waiter)).map(|woke| match woke {
            Woke::Waited(waited) => waited,
            _ => Waited::Released,
        })
    }
}

/// A flow's wait for the input that answers its output.
struct Asked<'a, H: ServerHost> {
    port: &'a PortLock<H>,
    ask: Option<Ask>,
}

impl<H: ServerHost> Future for Asked<'_, H> {
    type Output = Input;
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Input> {
        let ask = self.ask.take();
        let mut port = self.port.lock();
        if let Some(ask) = ask {
            port.ask = Some(ask);
            return Poll::Pending;
        }
        match port.input.take() {
            Some(input) => Poll::Ready(input),
            None => Poll::Pending,
        }
    }
}

/// A flow running as a coroutine: it runs only inside
/// [`Coroutine::poll_output`] (with a waker that wakes nothing), and
/// between two outputs it waits only for its next input, through the port.
pub(super) struct Coroutine<'s, H: ServerHost, T> {
    io: Io<H>,
    /// The flow, until it answered.
    flow: Option<BoxFuture<'s, T>>,
}

impl<'s, H: ServerHost, T> Coroutine<'s, H, T> {
    /// `flow`, which waits only through `io`'s port.
    fn new<Fut>(io: Io<H>, flow: Fut) -> Self
    where
        Fut: Future<Output = T> + MaybeSend + 's,
    {
        Coroutine {
            io,
            flow: Some(Box::pin(flow)),
        }
    }

    /// Runs the flow to its next ask (`Ok`) or its answer (`Err`);
    /// `None`: nothing until the last ask's input, or it answered already.
    fn poll(&mut self) -> Option<Result<Ask, T>> {
        let flow = self.flow.as_mut()?;
        let mut cx = Context::from_waker(std::task::Waker::noop());
        if let Poll::Ready(answer) = flow.as_mut().poll(&mut cx) {
            self.flow = None;
            return Some(Err(answer));
        }
        let mut port = self.io.port.lock();
        let ask = port.ask.take()?;
        port.asked = true;
        Some(Ok(ask))
    }

    /// Gives the input for the last output; ignored when none is awaited.
    fn give(&mut self, input: Input) {
        let mut port = self.io.port.lock();
        if std::mem::take(&mut port.asked) {
            port.input = Some(input);
        }
    }
}

/// One HTTP request in progress ([`A2aServer::handle_request`]): a machine
/// with no I/O. Drive it with [`Exchange::poll_output`] and the `handle_*`
/// inputs, or hand it to [`A2aServer::drive`].
pub struct Exchange<'s, S: TaskStore, H: ServerHost, F: Fulfiller> {
    server: &'s Arc<A2aServer<S, H, F>>,
    state: State<'s, H>,
    /// The answer gets the CORS headers for this `Origin` (every answer
    /// but a misdirected request's).
    cors: Option<Option<String>>,
    /// The request's span, when the host records them.
    span: Option<Box<Traced>>,
}

/// A request's span until its answer ends it.
pub(super) struct Traced {
    pub(super) span: crate::SpanRecord,
    pub(super) hook: crate::SpanHook,
}

// One per request, never moved once driven: boxing GetTask's state would
// cost every GetTask an allocation.
#[allow(clippy::large_enum_variant)]
enum State<'s, H: ServerHost> {
    /// Answered without waiting for anything.
    Ready(Reply),
    /// A plain GetTask over JSON-RPC (the hot path), explicit: its read,
    /// then its answer.
    Get(GetTask),
    /// A flow that waits (every other call), as a coroutine.
    Flow(Coroutine<'s, H, Reply>),
    Done,
}

/// Where a flow that waits starts.
enum Entry<'s> {
    /// A call under the REST mount (the path below it), and the card
    /// whose plain routes answer a path the binding does not take.
    Rest(String, &'s Card),
    /// A JSON-RPC call whose caller the host verifies with these.
    Verify(&'s auth::AuthConfig),
    /// A JSON-RPC call from this caller, parsed.
    Call(Option<Caller>, Result<RpcRequest, (Value, RpcError)>),
}

/// A JSON-RPC GetTask with no long-poll.
struct GetTask {
    req: HttpRequest,
    call: RpcRequest,
    /// The task id, until the read takes it (the call's params keep it too).
    id: String,
    owner: Option<String>,
    history: Option<usize>,
    /// The read was handed out.
    asked: bool,
    /// What it gave, until polled.
    read: Option<Result<Option<Arc<Task>>, StoreError>>,
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> Exchange<'_, S, H, F> {
    /// What the request needs next. `None`: nothing until the input that
    /// answers the last output, or the exchange is over (its
    /// [`Output::Respond`] was given).
    pub fn poll_output(&mut self) -> Option<Output<Reply>> {
        Some(match self.poll()? {
            Ok(ask) => ask.into(),
            Err(reply) => Output::Respond(reply),
        })
    }

    /// The next ask (`Ok`) or the answer (`Err`), as [`Exchange::poll_output`].
    fn poll(&mut self) -> Option<Result<Ask, Reply>> {
        let reply = match &mut self.state {
            State::Ready(_) => match std::mem::replace(&mut self.state, State::Done) {
                State::Ready(reply) => reply,
                _ => return None,
            },
            State::Get(get) if !get.asked => {
                get.asked = true;
                let id = std::mem::take(&mut get.id);
                return Some(Ok(Ask::Store(StoreCall::GetShared(id))));
            }
            State::Get(get) => match self.server.get_task(get.read.take()?, get) {
                Some(reply) => reply,
                // The task's fulfilment is gone: the call runs as any
                // other, which reads the task again and fails it.
                None => {
                    let State::Get(get) = std::mem::replace(&mut self.state, State::Done) else {
                        return None;
                    };
                    self.state = self.server.rpc_flow(get);
                    return self.poll();
                }
            },
            State::Flow(flow) => match flow.poll()? {
                Ok(ask) => return Some(Ok(ask)),
                Err(reply) => reply,
            },
            State::Done => return None,
        };
        Some(Err(self.respond(reply)))
    }

    /// The answer, with its CORS headers and its span ended; the exchange is over.
    fn respond(&mut self, mut reply: Reply) -> Reply {
        self.state = State::Done;
        if let Some(origin) = self.cors.take() {
            self.server
                .add_cors_for(origin.as_deref(), reply.head_mut());
        }
        if let Some(traced) = self.span.take() {
            self.server.end_span(*traced, &reply);
        }
        reply
    }

    fn give(&mut self, input: Input) {
        match (&mut self.state, input) {
            (State::Flow(flow), input) => flow.give(input),
            (State::Get(get), Input::Store(done)) if get.asked && get.read.is_none() => {
                get.read = Some(done.shared());
            }
            _ => {}
        }
    }

    /// What the store gave for [`Output::Store`].
    pub fn handle_store(&mut self, done: StoreDone) {
        self.give(Input::Store(done))
    }

    /// The host's check of [`Output::VerifyJwt`]'s token: its claims, or why not.
    pub fn handle_jwt(&mut self, verified: Result<auth::Claims, String>) {
        self.give(Input::Jwt(verified))
    }

    /// The verdict of [`Output::Authenticate`]'s verifier.
    pub fn handle_verdict(&mut self, verdict: auth::Verdict) {
        self.give(Input::Verdict(verdict))
    }

    /// What ended [`Output::Wait`] ([`A2aServer::wait`]).
    pub fn handle_woken(&mut self, woken: Woken) {
        self.give(Input::Woken(woken.0))
    }

    /// [`Output::Wait`] ended as the stored task changed (perhaps on
    /// another replica): the request reads it again.
    pub fn handle_store_change(&mut self) {
        self.give(Input::Woken(Woke::Changed))
    }

    /// [`Output::Wait`] ended at `now_ms` ([`Wait::until_ms`] came).
    pub fn handle_timeout(&mut self, now_ms: u64) {
        self.give(Input::Woken(Woke::Timeout(now_ms)))
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// `flow`, given its side of a new port, as a coroutine.
    pub(super) fn coroutine<'s, T, Fut>(
        &self,
        flow: impl FnOnce(Io<H>) -> Fut,
    ) -> Coroutine<'s, H, T>
    where
        Fut: Future<Output = T> + MaybeSend + 's,
    {
        let port: Arc<PortLock<H>> = Arc::new(Lock::new(Port::default()));
        let flow = flow(Io { port: port.clone() });
        Coroutine::new(Io { port }, flow)
    }

    /// Takes one HTTP request: the exchange that answers it (what
    /// [`A2aServer::serve`] drives). Routing is done here, at once: the
    /// answers that need nothing (the card, the health check, a refusal)
    /// are ready, a plain GetTask is read, any other call runs as a flow.
    pub fn handle_request(self: &Arc<Self>, mut req: HttpRequest) -> Exchange<'_, S, H, F> {
        let span = self
            .host
            .span_hook()
            .map(|hook| Box::new(self.begin_span(&mut req, hook.clone())));
        let mut exchange = Exchange {
            server: self,
            state: State::Done,
            cors: None,
            span,
        };
        if !self.host_allowed(req.header("Host")) {
            exchange.state = State::Ready(Reply::Full(misdirected()));
            return exchange;
        }
        exchange.cors = Some(req.header("Origin").map(str::to_string));
        exchange.state = self.route(req);
        exchange
    }

    /// Where `req` goes.
    fn route(self: &Arc<Self>, req: HttpRequest) -> State<'_, H> {
        let ready = |resp| State::Ready(Reply::Full(resp));
        if req.method == "POST" && !policy::call_content_type(req.header("Content-Type")) {
            return ready(policy::not_json());
        }
        let Some(card) = &self.card else {
            return ready(http::plain(404, "not found"));
        };
        if matches!(req.method.as_str(), "GET" | "HEAD") && path_of(&req.url) == HEALTH_PATH {
            return ready(self.tasks().health.respond());
        }
        if self.jsonrpc && req.method == "POST" && path_of(&req.url) == "/" {
            return self.json_rpc(req);
        }
        if let Some(under) = self.rest_path(&req) {
            return self.flow(req, Entry::Rest(under, card));
        }
        ready(self.route_plain(&req, card))
    }

    /// A JSON-RPC call: its caller (the authentication step: only calls
    /// need credentials), then a plain GetTask read here, any other call
    /// as a flow.
    fn json_rpc(self: &Arc<Self>, req: HttpRequest) -> State<'_, H> {
        let caller = match &self.auth {
            None => None,
            Some(auth) => match verify::AuthMachine::new(auth, &req).begin() {
                Some(principal) => Some(Caller::new(principal)),
                // A token or the host's own verifier to ask.
                None => return self.flow(req, Entry::Verify(auth)),
            },
        };
        let parsed = RpcRequest::parse(&req);
        let get = match &parsed {
            Ok(call)
                if Method::from_name(&call.method) == Some(Method::Get)
                    && self.long_poll(&req, true).is_none() =>
            {
                let history = validate::history_length(&call.params, "historyLength");
                match (history, task_id(&call.params)) {
                    (Ok(history), Ok(id)) => Some((history, id.to_string())),
                    // Refused as the flow refuses it.
                    _ => None,
                }
            }
            _ => None,
        };
        match (get, parsed) {
            (Some((history, id)), Ok(call)) => State::Get(GetTask {
                req,
                call,
                id,
                owner: caller.map(|c| c.owner),
                history,
                asked: false,
                read: None,
            }),
            (_, parsed) => self.flow(req, Entry::Call(caller, parsed)),
        }
    }

    /// A plain GetTask's answer, given what the store read; `None`
    /// when the task's fulfilment is gone.
    fn get_task(
        &self,
        read: Result<Option<Arc<Task>>, StoreError>,
        get: &GetTask,
    ) -> Option<Reply> {
        let id = task_id(&get.call.params).unwrap_or_default();
        let mut machine = read::ReadMachine::new(id, get.owner.as_deref());
        let outcome = match machine.handle_read(read, || self.host.unix_ms(), |t| self.abandoned(t))
        {
            ReadStep::Answer(Ok(task)) => {
                Ok(Answered::Task(Answer::about(&get.call, task, get.history)))
            }
            ReadStep::Answer(Err(e)) => Err(e),
            _ => return None,
        };
        let resp = rpc_answer(&get.req, &get.call.id, &outcome, get.call.shape, None);
        Some(Reply::Full(resp))
    }

    /// A plain GetTask as the general flow runs it.
    fn rpc_flow(self: &Arc<Self>, get: GetTask) -> State<'_, H> {
        let GetTask {
            req, call, owner, ..
        } = get;
        let caller = owner.map(|owner| Caller { owner });
        self.flow(req, Entry::Call(caller, Ok(call)))
    }

    /// The flow of `req` from `entry`, as a coroutine.
    fn flow<'s>(self: &'s Arc<Self>, req: HttpRequest, entry: Entry<'s>) -> State<'s, H> {
        State::Flow(self.coroutine(|io| self.run_flow(io, req, entry)))
    }

    /// Every flow that waits: a call under the REST mount, a JSON-RPC call
    /// whose caller the host verifies, a JSON-RPC call.
    async fn run_flow(self: &Arc<Self>, io: Io<H>, req: HttpRequest, entry: Entry<'_>) -> Reply {
        let (caller, parsed) = match entry {
            Entry::Rest(under, card) => {
                return match Box::pin(self.rest(&io, &req, &under)).await {
                    Some(reply) => reply,
                    None => Reply::Full(self.route_plain(&req, card)),
                };
            }
            Entry::Verify(auth) => match verify::authenticate(&io, auth, &self.host, &req).await {
                Ok(principal) => (Some(Caller::new(principal)), RpcRequest::parse(&req)),
                Err(refusal) => {
                    let v10 = rpc::requested_version(&req).is_some_and(|v| v.starts_with('1'));
                    return Reply::Full(verify::refusal_response(auth, &refusal, v10));
                }
            },
            Entry::Call(caller, parsed) => (caller, parsed),
        };
        self.json_rpc_call(&io, &req, caller.as_ref(), parsed).await
    }

    /// Runs `exchange` to its answer: its store calls on this server's
    /// store, its verifications through the host, its waits through
    /// [`A2aServer::wait`]. `None`: it stalled (a flow that waits on
    /// nothing, which is a bug).
    pub async fn drive(&self, mut exchange: Exchange<'_, S, H, F>) -> Option<Reply> {
        loop {
            match exchange.poll()? {
                Ok(ask) => {
                    let input = self.carry_out(ask).await;
                    exchange.give(input)
                }
                Err(reply) => return Some(reply),
            }
        }
    }

    /// [`A2aServer::drive`] for a flow of its own (a sweep, a check).
    pub(super) async fn run<T>(&self, mut flow: Coroutine<'_, H, T>) -> Option<T> {
        loop {
            match flow.poll()? {
                Ok(ask) => {
                    let input = self.carry_out(ask).await;
                    flow.give(input)
                }
                Err(answer) => return Some(answer),
            }
        }
    }

    /// Carries out what a flow asked: the input that answers it.
    async fn carry_out(&self, ask: Ask) -> Input {
        match ask {
            Ask::Store(call) => Input::Store(call.perform(&self.store).await),
            Ask::Jwt(token) => Input::Jwt(self.host.verify_jwt(&token).await),
            Ask::Verdict(verdict) => Input::Verdict(verdict.await),
            Ask::Wait(wait) => Input::Woken(self.wait(wait).await.0),
        }
    }

    /// Waits for what `wait` names: the first of a running task's saved
    /// state, a change of the stored task ([`A2aServer::store_changed`]),
    /// and the host timers of its times. A host without timers
    /// ([`ServerHost::sleep_until`]) ends a wait only on the first two.
    pub fn wait(&self, wait: Wait) -> impl Future<Output = Woken> + '_ {
        let timer = |at: Option<u64>| at.and_then(|at| self.host.sleep_until(at));
        let (mut until, mut poll) = (timer(wait.until_ms), timer(wait.poll_ms));
        std::future::poll_fn(move |cx| {
            if let Some(slot) = wait.waiter {
                let waited = self.tasks().poll(slot, cx, |t| t.poll_wait(slot));
                if let Poll::Ready(waited) = waited {
                    return Poll::Ready(Woken(Woke::Waited(waited)));
                }
            }
            #[cfg(feature = "replicas")]
            if let Some(slot) = wait.watch {
                if self
                    .tasks()
                    .poll(slot, cx, |t| t.poll_watch(slot))
                    .is_ready()
                {
                    return Poll::Ready(Woken(Woke::Changed));
                }
            }
            if let (Some(timer), Some(at)) = (until.as_mut(), wait.until_ms) {
                if timer.as_mut().poll(cx).is_ready() {
                    // The caller's wait: its timer ends at (or soon after) it.
                    return Poll::Ready(Woken(Woke::Timeout(at)));
                }
            }
            if let Some(timer) = poll.as_mut() {
                if timer.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Woken(Woke::Timeout(self.host.now_ms())));
                }
            }
            Poll::Pending
        })
    }
}

/// The answer to a request whose exchange stalled: its flow waited on
/// nothing the exchange could hand out (a bug, never a caller's doing).
pub(super) fn stalled() -> HttpResponse {
    http::plain(500, "internal error: the request stalled")
}
