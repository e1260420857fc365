//! `createA2AHandler` (an edge worker's `fetch`) and `buildAgentCard`.
//!
//! The handler converts a `Request` into the core's `HttpRequest`, calls the
//! same `A2aServer::serve` as the native server, and converts the answer into
//! a `Response` (an event stream becomes a `ReadableStream` body, pulled one
//! SSE frame at a time). The work the server starts (fulfilment, push
//! deliveries) runs in the background with `spawn_local`; when the request
//! came with a `ctx` that has `waitUntil` (workerd), its promise is handed to
//! it so the runtime keeps the worker alive until the task settles.

use crate::convert::{
    console_error, error_text, get, header_pairs, is_absent, misuse, opt_function, opt_string,
    pairs_to_js, ser_to_js, set, span_hook, to_js, to_json,
};
use crate::handles::{self, Handle};
use crate::skills::{skill_list, skill_set};
use crate::store::{HandlerStore, JsStore, Memory};
use crate::toolkit::{CoreToolkit, SharedToolkit};
use crate::transport::{new_id, JsTransport};
use futures_util::StreamExt;
use js_sys::{Function, Object, Promise, Uint8Array};
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use toolnexus_core::llm::LlmConfig;
use toolnexus_core::server::auth::{AuthConfig, Claims, Verdict};
use toolnexus_core::server::{
    build_agent_card, A2aConfig, A2aServer, Admission, BodyRefusal, CardSpec, CorsOrigin,
    EchoFulfiller, EventBody, FulfilRequest, Fulfiller, HostStore, LlmFulfiller, Progress, Reply,
    ServerHost, ServerOptions, TaskEvent, DEFAULT_HEARTBEAT,
};
use toolnexus_core::skills::Skill;
use toolnexus_core::BoxFuture;
use toolnexus_core::{HttpRequest, HttpResponse};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::{spawn_local, JsFuture};

#[wasm_bindgen]
extern "C" {
    type JsRequest;
    #[wasm_bindgen(method, catch, js_name = arrayBuffer)]
    fn array_buffer(this: &JsRequest) -> Result<Promise, JsValue>;

    #[wasm_bindgen(js_name = Response)]
    type JsResponse;
    #[wasm_bindgen(constructor, js_class = "Response", catch)]
    fn new(body: &JsValue, init: &JsValue) -> Result<JsResponse, JsValue>;
}

/// `a2a` options as the card identity; `false`/`null` means no A2A profile.
fn a2a_config(v: &JsValue) -> Result<Option<A2aConfig>, JsValue> {
    if v.is_undefined() {
        return Ok(Some(A2aConfig::default()));
    }
    if v.is_null() || v.as_bool() == Some(false) {
        return Ok(None);
    }
    let value = to_json(v, "a2a")?;
    A2aConfig::from_value(&value).map(Some).map_err(|e| {
        misuse(format!(
            "a2a must be {{name?, description?, version?, provider?, skills?, bindings?, tenant?}}: {e}"
        ))
    })
}

/// `buildAgentCard(cfg, skills, url)`: the card `createA2AHandler` serves. Pure.
#[wasm_bindgen(js_name = buildAgentCard)]
pub fn build_agent_card_js(
    cfg: JsValue,
    skills: JsValue,
    url: JsValue,
) -> Result<JsValue, JsValue> {
    let cfg = if is_absent(&cfg) {
        A2aConfig::default()
    } else {
        a2a_config(&cfg)?.unwrap_or_default()
    };
    let skills = skill_list(&skill_set(&skills, "skills")?);
    let url = url
        .as_string()
        .ok_or_else(|| misuse("buildAgentCard(cfg, skills, url): url must be a string"))?;
    Ok(to_js(&build_agent_card(&cfg, &skills, &url)))
}

// ---------------------------------------------------------------------------
// The host: ids, background jobs, hooks

thread_local! {
    /// The `ctx` of the request whose future is being polled right now (see [`WithCtx`]).
    static CURRENT_CTX: RefCell<Option<JsValue>> = const { RefCell::new(None) };
}

/// Makes `ctx` the current request context while `fut` is polled, and
/// hands the work the server started during that poll (a task's job, its
/// push deliveries) to that request's `waitUntil`. Requests interleave at
/// await points, but a poll is one piece: what it starts is its request's.
/// Work runs under its request's `ctx` too, so what it starts (a push
/// delivery after the fulfilment saved a state) is kept alive as well.
struct WithCtx<F: ?Sized> {
    ctx: Option<JsValue>,
    /// Where a JS verifier's rejecting `Response` goes (requests only).
    refusal: Option<crate::auth::Refusal>,
    /// The server whose work is taken after each poll.
    server: Arc<Server>,
    fut: Pin<Box<F>>,
}

impl<F: Future + ?Sized> Future for WithCtx<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        // Work queued before this poll is an enclosing poll's (a JS hook
        // that called the handler synchronously): it runs under that ctx.
        run_started(&this.server);
        let outer = CURRENT_CTX.with(|c| c.replace(this.ctx.clone()));
        let outer_refusal = crate::auth::CURRENT_REFUSAL.with(|c| c.replace(this.refusal.clone()));
        let polled = this.fut.as_mut().poll(cx);
        run_started(&this.server);
        CURRENT_CTX.with(|c| *c.borrow_mut() = outer);
        crate::auth::CURRENT_REFUSAL.with(|c| *c.borrow_mut() = outer_refusal);
        polled
    }
}

/// Runs the work `server` started (one copy for every future type).
#[inline(never)]
fn run_started(server: &Arc<Server>) {
    for work in server.take_work() {
        run_work(server, work);
    }
}

/// Runs `work` in the background, kept alive by the current request's
/// `ctx.waitUntil` when there is one (workerd), else with `spawn_local`.
fn run_work(server: &Arc<Server>, work: BoxFuture<'static, ()>) {
    let ctx = CURRENT_CTX.with(|c| c.borrow().clone());
    let job = WithCtx {
        ctx: ctx.clone(),
        refusal: None,
        server: server.clone(),
        fut: work,
    };
    match ctx {
        Some(ctx) => {
            // Mapped, not awaited in an async block (a state machine of its own).
            let done = crate::bound::promise(Box::pin(futures_util::FutureExt::map(job, |()| {
                Ok(JsValue::UNDEFINED)
            })));
            let wait_until: Function = get(&ctx, "waitUntil").unchecked_into();
            if let Err(e) = wait_until.call1(&ctx, &done) {
                report(&format!("ctx.waitUntil failed: {}", error_text(&e)));
            }
        }
        None => spawn_local(job),
    }
}

#[derive(Clone)]
struct WasmHost {
    on_task: Option<Function>,
    /// The user's `authenticate(request)`.
    authenticate: Option<Function>,
    /// The `auth.jwt` verifier's signature check (WebCrypto).
    jwt: Option<Rc<crate::auth::JwtVerifier>>,
    /// `onSpan`, as core's span hook: requests and task turns.
    on_span: Option<toolnexus_core::SpanHook>,
}

fn report(problem: &str) {
    console_error(&format!("toolnexus: {problem}"));
}

impl toolnexus_core::HostBase for WasmHost {
    fn new_id(&self) -> String {
        new_id()
    }
    /// `Date.now()`: status timestamps.
    fn unix_ms(&self) -> Option<u64> {
        Some(js_sys::Date::now() as u64)
    }
    fn now_ms(&self) -> u64 {
        crate::transport::now_ms()
    }
}

impl ServerHost for WasmHost {
    type Locks = toolnexus_core::server::CellLocks;

    fn on_task(&self, event: TaskEvent) {
        let Some(hook) = &self.on_task else { return };
        match hook.call1(&JsValue::UNDEFINED, &ser_to_js(&event)) {
            Err(e) => report(&format!("onTask threw: {}", error_text(&e))),
            // A hook that returns a promise: report its rejection instead of
            // leaving it unhandled (which ends a Node process).
            Ok(ret) if get(&ret, "then").is_function() => spawn_local(async move {
                if let Err(e) = JsFuture::from(Promise::resolve(&ret)).await {
                    report(&format!("onTask failed: {}", error_text(&e)));
                }
            }),
            Ok(_) => {}
        }
    }

    fn report(&self, problem: &str) {
        report(problem);
    }

    fn span_hook(&self) -> Option<&toolnexus_core::SpanHook> {
        self.on_span.as_ref()
    }

    /// The signature of a JWT, through WebCrypto (see [`crate::auth`]).
    fn verify_jwt(&self, token: &str) -> BoxFuture<'static, Result<Claims, String>> {
        match &self.jwt {
            Some(jwt) => Box::pin(jwt.clone().verify(token.to_string())),
            None => Box::pin(std::future::ready(Err(
                "no jwt verifier is configured".into()
            ))),
        }
    }

    /// The user's `authenticate(request)` (see [`crate::auth`]).
    fn authenticate(&self, req: &HttpRequest) -> Option<BoxFuture<'static, Verdict>> {
        let function = self.authenticate.clone()?;
        let refusal = crate::auth::CURRENT_REFUSAL.with(|c| c.borrow().clone());
        Some(Box::pin(crate::auth::js_authenticate(
            function,
            req.clone(),
            refusal,
        )))
    }

    /// setTimeout, as the client's timers: heartbeats of idle streams,
    /// `Prefer: wait` long-polls.
    fn sleep_until(&self, at_ms: u64) -> Option<BoxFuture<'static, ()>> {
        Some(Box::pin(crate::transport::timer_until(at_ms)))
    }

    /// `fetch`, as the client's requests: push notifications.
    #[cfg(feature = "push")]
    fn send(
        &self,
        req: HttpRequest,
    ) -> Option<BoxFuture<'static, Result<HttpResponse, toolnexus_core::TransportError>>> {
        Some(Box::pin(crate::transport::send(req)))
    }
}

// ---------------------------------------------------------------------------
// Who answers tasks

/// Runs the LLM client loop with the skills (and the optional toolkit's tools):
/// the core's [`LlmFulfiller`] over the toolkit as it is when a task starts.
struct ModelFulfiller {
    llm: Rc<LlmConfig>,
    /// A toolkit with the handler's skills only.
    skills: Arc<CoreToolkit>,
    toolkit: Option<Rc<SharedToolkit>>,
    /// The `onSpan` hook, as core's span hook.
    on_span: Option<toolnexus_core::SpanHook>,
}

impl ModelFulfiller {
    /// The toolkit a task runs with: the JS toolkit as it is now, its skills
    /// replaced by the handler's (when the handler has any).
    fn toolkit(&self) -> Arc<CoreToolkit> {
        let Some(shared) = &self.toolkit else {
            return self.skills.clone();
        };
        let mut tk = CoreToolkit::clone(&shared.current());
        if let Some(skills) = self.skills.skills().filter(|s| !s.is_empty()) {
            tk.add_skills(skills.clone());
        }
        if let Some(hook) = &self.on_span {
            tk = tk.with_span_hook(hook.clone());
        }
        // An Arc for the core's fulfiller; nothing here crosses threads.
        #[allow(clippy::arc_with_non_send_sync)]
        let tk = Arc::new(tk);
        tk
    }
}

impl Fulfiller for ModelFulfiller {
    fn fulfil(
        &self,
        request: FulfilRequest,
        progress: Progress,
    ) -> BoxFuture<'static, Result<String, String>> {
        LlmFulfiller {
            toolkit: self.toolkit(),
            llm: LlmConfig::clone(&self.llm),
        }
        .fulfil(request, progress)
    }
}

/// A JS function answers: `client(request, emit)` with `request` =
/// `{taskId, contextId, text, skill?, history}` (`history`: the earlier
/// turns, `[{role: "user" | "agent", text}]`) and `emit` = `{status(text),
/// artifact(text, {lastChunk?})}`; it returns (or resolves to) the answer
/// text, or `{inputRequired: question}` / `{authRequired: prompt}` to stop
/// the task until the caller answers; a throw or rejection fails the task
/// with its message.
struct JsFulfiller {
    function: Function,
}

/// The `emit` object handed to a JS fulfiller.
fn emitter(progress: Progress) -> JsValue {
    let emit: JsValue = Object::new().into();
    let p = progress.clone();
    let status = Closure::<dyn Fn(JsValue)>::new(move |text: JsValue| {
        p.status(text.as_string().unwrap_or_else(|| error_text(&text)));
    });
    set(&emit, "status", &status.into_js_value());
    let artifact = Closure::<dyn Fn(JsValue, JsValue)>::new(move |text: JsValue, opts: JsValue| {
        let last = !is_absent(&opts) && get(&opts, "lastChunk").as_bool() == Some(true);
        progress.artifact_chunk(text.as_string().unwrap_or_else(|| error_text(&text)), last);
    });
    set(&emit, "artifact", &artifact.into_js_value());
    emit
}

impl Fulfiller for JsFulfiller {
    fn fulfil(
        &self,
        request: FulfilRequest,
        progress: Progress,
    ) -> BoxFuture<'static, Result<String, String>> {
        let function = self.function.clone();
        Box::pin(async move {
            let req: JsValue = Object::new().into();
            set(&req, "taskId", &request.task_id.as_str().into());
            set(&req, "contextId", &request.context_id.as_str().into());
            set(&req, "text", &request.text.as_str().into());
            if let Some(skill) = &request.skill {
                set(&req, "skill", &skill.as_str().into());
            }
            // The task's trace, for the fulfiller's own requests.
            if let Some(trace) = &request.trace {
                set(&req, "traceparent", &trace.traceparent().into());
            }
            let history = js_sys::Array::new();
            for m in &request.history {
                let turn: JsValue = Object::new().into();
                let role = match m.role {
                    toolnexus_core::Role::User => "user",
                    toolnexus_core::Role::Agent => "agent",
                };
                set(&turn, "role", &role.into());
                set(&turn, "text", &m.text().into());
                history.push(&turn);
            }
            set(&req, "history", &history);
            let returned = function
                .call2(&JsValue::UNDEFINED, &req, &emitter(progress.clone()))
                .map_err(|e| error_text(&e))?;
            let answer = JsFuture::from(Promise::resolve(&returned))
                .await
                .map_err(|e| error_text(&e))?;
            if let Some(text) = answer.as_string() {
                return Ok(text);
            }
            let asked = |key: &str| {
                (!is_absent(&answer))
                    .then(|| get(&answer, key).as_string())
                    .flatten()
            };
            if let Some(question) = asked("inputRequired") {
                progress.input_required(question);
            } else if let Some(prompt) = asked("authRequired") {
                progress.auth_required(prompt);
            } else {
                return Err(
                    "the fulfiller must return a string, {inputRequired} or {authRequired}".into(),
                );
            }
            Ok(String::new())
        })
    }
}

// ---------------------------------------------------------------------------
// The handler

type Server = A2aServer<HandlerStore, WasmHost, Arc<dyn Fulfiller>>;

/// What a server is built from.
struct Parts {
    a2a: Option<A2aConfig>,
    skills: Vec<Skill>,
    store: Option<JsValue>,
    host: WasmHost,
    fulfiller: Arc<dyn Fulfiller>,
    url: Option<String>,
    cors: Option<CorsOrigin>,
    heartbeat: Option<Duration>,
    interrupted_after: Option<Duration>,
    lease: Option<Duration>,
    store_poll: Option<Duration>,
    retention: Option<Duration>,
    auth: Option<AuthConfig>,
    #[cfg(feature = "push")]
    push: Option<toolnexus_core::server::PushOptions>,
}

/// How long a task in a JS store may go without a status change, while no
/// instance here runs it, before a read fails it as interrupted: 10 minutes.
const DEFAULT_INTERRUPTED_AFTER: Duration = Duration::from_secs(600);

/// The lease of a task running on a JS store: 30 s, renewed every 10 s.
const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How often a stream or long-poll on a task running elsewhere reads a JS
/// store again when nothing told of a change: 2 s.
const DEFAULT_STORE_POLL: Duration = Duration::from_secs(2);

/// `options[key]` in milliseconds: absent ⇒ `default`; `0`, `false` or
/// `null` ⇒ none; a positive number ⇒ that long.
fn opt_duration(
    options: &JsValue,
    key: &str,
    default: Option<Duration>,
) -> Result<Option<Duration>, JsValue> {
    let v = get(options, key);
    if v.is_undefined() {
        return Ok(default);
    }
    if v.is_null() || v.as_bool() == Some(false) || v.as_f64() == Some(0.0) {
        return Ok(None);
    }
    match v.as_f64() {
        Some(ms) if ms.is_finite() && ms >= 1.0 => Ok(Some(Duration::from_millis(ms as u64))),
        _ => Err(misuse(format!(
            "createA2AHandler options.{key} must be a positive number of milliseconds, or 0/false/null for none"
        ))),
    }
}

struct HandlerState {
    server: Arc<Server>,
    /// When the next request looks for tasks whose lease ran out (a JS
    /// store with leases): `now_ms`; `u64::MAX` for never.
    sweep_at: std::cell::Cell<u64>,
    lease_ms: u64,
}

impl HandlerState {
    fn new(p: Parts) -> Self {
        // A worker learns its own origin only from requests: without a
        // configured `url`, the card advertises each request's origin.
        #[cfg(feature = "push")]
        let a2a = p.a2a.map(|mut config| {
            config.push_notifications = p.push.is_some();
            config
        });
        #[cfg(not(feature = "push"))]
        let a2a = p.a2a;
        let card = a2a.map(|config| match &p.url {
            Some(url) => CardSpec::Fixed(build_agent_card(&config, &p.skills, url)),
            None => CardSpec::RequestOrigin {
                config,
                skills: p.skills,
            },
        });
        let watch = p.store.as_ref().map(|s| get(s, "watch"));
        let store = match p.store {
            Some(s) => HostStore::Host(JsStore(s, Default::default())),
            None => HostStore::Memory(Memory::default()),
        };
        let server = A2aServer::new(
            ServerOptions {
                card,
                cors_origin: p.cors,
                heartbeat: p.heartbeat,
                interrupted_after: p.interrupted_after,
                lease: p.lease,
                store_poll: p.store_poll,
                retention: p.retention,
                auth: p.auth,
                #[cfg(feature = "push")]
                push: p.push,
                ..Default::default()
            },
            store,
            p.host,
            p.fulfiller,
        );
        // `store.watch(changed)`: the store tells of changes made elsewhere
        // (another isolate), so streams and long-polls here wake at once.
        if let (Some(watch), Some(JsStore(js, _))) = (watch, server.store().host()) {
            if let Some(watch) = watch.dyn_ref::<Function>() {
                let weak = Arc::downgrade(&server);
                let changed =
                    Closure::<dyn Fn(JsValue, JsValue)>::new(move |id: JsValue, v: JsValue| {
                        if let (Some(server), Some(id)) = (weak.upgrade(), id.as_string()) {
                            server.store_changed(&id, v.as_f64().map(|v| v as u64));
                        }
                    });
                if let Err(e) = watch.call1(js, &changed.into_js_value()) {
                    report(&format!("store.watch threw: {}", error_text(&e)));
                }
            }
        }
        let lease_ms = p.lease.map_or(u64::MAX, |l| l.as_millis() as u64);
        HandlerState {
            server,
            sweep_at: std::cell::Cell::new(if p.lease.is_some() { 0 } else { u64::MAX }),
            lease_ms,
        }
    }

    /// Now and then (once a lease period), a request also fails the JS
    /// store's tasks whose lease ran out (the core's recovery) and deletes
    /// its finished tasks past `retentionMs` (the core's sweep), in the
    /// background.
    fn sweep(&self) {
        let now = crate::transport::now_ms();
        if now < self.sweep_at.get() {
            return;
        }
        self.sweep_at.set(now.saturating_add(self.lease_ms));
        let server = self.server.clone();
        run_work(
            &self.server,
            Box::pin(async move {
                if let Err(e) = server.recover_expired().await {
                    report(&format!("looking for abandoned tasks failed: {e}"));
                }
                if let Err(e) = server.sweep().await {
                    report(&format!("deleting finished tasks failed: {e}"));
                }
            }),
        );
    }
}

/// The request as the core's `HttpRequest`, or the server's answer refusing
/// it (413, 400, with the CORS headers): the rules are the core's.
async fn read_request(
    server: &Server,
    request: &JsValue,
) -> Result<Result<HttpRequest, HttpResponse>, JsValue> {
    let (Some(method), Some(url)) = (
        get(request, "method").as_string(),
        get(request, "url").as_string(),
    ) else {
        return Err(misuse("the handler takes a Request"));
    };
    let headers = header_pairs(&get(request, "headers"));
    let limit = match server.admit(&headers) {
        Admission::Read { limit } => limit,
        Admission::Refuse(answer) => return Ok(Err(answer)),
    };
    let body = if method == "GET" || method == "HEAD" {
        Vec::new()
    } else {
        let read = request
            .unchecked_ref::<JsRequest>()
            .array_buffer()
            .map_err(|e| misuse(format!("cannot read the request body: {}", error_text(&e))))?;
        let buffer = JsFuture::from(read).await?;
        Uint8Array::new(&buffer).to_vec()
    };
    if body.len() > limit {
        return Ok(Err(server.refuse(BodyRefusal::TooLarge)));
    }
    Ok(Ok(HttpRequest {
        method,
        url,
        headers,
        body,
    }))
}

/// A streamed answer: a `Response` whose body is a `ReadableStream` pulling
/// one SSE frame at a time; canceling it (the caller left) drops the stream,
/// which unsubscribes from the task.
fn to_stream_response(head: HttpResponse, body: EventBody) -> Result<JsValue, JsValue> {
    let body = Rc::new(RefCell::new(Some(body)));
    let source: JsValue = Object::new().into();
    let pulled = body.clone();
    let pull = Closure::<dyn Fn(JsValue) -> Promise>::new(move |controller: JsValue| {
        let body = pulled.clone();
        crate::bound::promise(Box::pin(async move {
            // Pulls never overlap: the stream waits for this promise.
            let taken = body.borrow_mut().take();
            let next = match taken {
                Some(mut stream) => {
                    let next = stream.next().await;
                    *body.borrow_mut() = Some(stream);
                    next
                }
                None => None,
            };
            match next {
                Some(frame) => {
                    let enqueue: Function = get(&controller, "enqueue").unchecked_into();
                    enqueue.call1(&controller, &Uint8Array::from(&frame[..]))?;
                }
                None => {
                    body.borrow_mut().take();
                    let close: Function = get(&controller, "close").unchecked_into();
                    close.call0(&controller)?;
                }
            }
            Ok(JsValue::UNDEFINED)
        }))
    });
    set(&source, "pull", &pull.into_js_value());
    let canceled = body;
    let cancel = Closure::<dyn Fn()>::new(move || {
        canceled.borrow_mut().take();
    });
    set(&source, "cancel", &cancel.into_js_value());
    let ctor = get(&js_sys::global(), "ReadableStream");
    if !ctor.is_function() {
        return Err(misuse("this runtime has no ReadableStream"));
    }
    let ctor: &Function = ctor.unchecked_ref();
    let stream = js_sys::Reflect::construct(ctor, &js_sys::Array::of1(&source))?;
    let init: JsValue = Object::new().into();
    set(&init, "status", &head.status.into());
    set(&init, "headers", &pairs_to_js(&head.headers));
    JsResponse::new(&stream, &init).map(Into::into)
}

fn to_response(resp: HttpResponse) -> Result<JsValue, JsValue> {
    let init: JsValue = Object::new().into();
    set(&init, "status", &resp.status.into());
    set(&init, "headers", &pairs_to_js(&resp.headers));
    let body: JsValue = if resp.body.is_empty() {
        JsValue::NULL
    } else {
        Uint8Array::from(&resp.body[..]).into()
    };
    JsResponse::new(&body, &init).map(Into::into)
}

impl HandlerState {
    /// One request: `(request, ctx?)` or a module worker's `(request, env, ctx)`.
    fn handle(self: Rc<Self>, request: JsValue, second: JsValue, third: JsValue) -> Promise {
        let ctx = [second, third]
            .into_iter()
            .find(|c| get(c, "waitUntil").is_function());
        let refusal = crate::auth::Refusal::default();
        let refused = refusal.clone();
        let server = self.server.clone();
        let fut = async move {
            self.sweep();
            let req = match read_request(&self.server, &request).await? {
                Ok(req) => req,
                Err(answer) => return to_response(answer),
            };
            let server = self.server.clone();
            let reply = server.serve(req).await;
            // The user's verifier refused with its own Response: that one,
            // with the core's CORS headers so a page can read it.
            if let Some(theirs) = refused.borrow_mut().take() {
                let head = match &reply {
                    Reply::Full(resp) => &resp.headers,
                    Reply::Stream { head, .. } => &head.headers,
                };
                return crate::auth::with_cors(theirs, head);
            }
            match reply {
                Reply::Full(resp) => to_response(resp),
                Reply::Stream { head, body } => to_stream_response(head, body),
            }
        };
        crate::bound::promise(Box::pin(WithCtx {
            ctx,
            refusal: Some(refusal),
            server,
            fut: Box::pin(fut),
        }))
    }
}

/// `createA2AHandler({skills, client, a2a?, store?, onTask?, onSpan?, toolkit?, url?, cors?})`:
/// a `(request, ctx?) => Promise<Response>` serving the card and JSON-RPC.
#[wasm_bindgen(js_name = createA2AHandler)]
pub fn create_a2a_handler(options: JsValue) -> Result<JsValue, JsValue> {
    const WHAT: &str = "createA2AHandler options";
    if !options.is_object() {
        return Err(misuse(
            "createA2AHandler takes {skills, client, a2a?, store?, onTask?}",
        ));
    }
    let skills = skill_set(&get(&options, "skills"), "skills")?;
    let toolkit = get(&options, "toolkit");
    let toolkit = match handles::find(&toolkit) {
        Some(Handle::Toolkit(s)) => Some(s),
        _ if is_absent(&toolkit) => None,
        _ => {
            return Err(misuse(format!(
                "{WHAT}.toolkit must be a Toolkit from createToolkit"
            )))
        }
    };
    let client = get(&options, "client");
    let on_span = opt_function(&options, "onSpan", WHAT)?.map(span_hook);
    let fulfiller: Arc<dyn Fulfiller> = if client.as_string().as_deref() == Some("echo") {
        Arc::new(EchoFulfiller)
    } else if client.is_function() {
        // Nothing here crosses threads.
        #[allow(clippy::arc_with_non_send_sync)]
        let f = Arc::new(JsFulfiller {
            function: client.unchecked_into(),
        });
        f
    } else {
        match handles::find(&client) {
            Some(Handle::Client(llm)) => {
                let mut tk = CoreToolkit::new(JsTransport);
                if let Some(hook) = &on_span {
                    tk = tk.with_span_hook(hook.clone());
                }
                tk.add_skills(skills.clone());
                // Fulfillers and toolkits are Arcs in the core; nothing here
                // crosses threads.
                #[allow(clippy::arc_with_non_send_sync)]
                let f = Arc::new(ModelFulfiller {
                    llm,
                    skills: Arc::new(tk),
                    toolkit,
                    on_span: on_span.clone(),
                });
                f
            }
            _ => {
                return Err(misuse(format!(
                    "{WHAT}.client must be a Client from createClient, a function (request, emit), or \"echo\""
                )))
            }
        }
    };
    let store = get(&options, "store");
    let store = if is_absent(&store) || store.as_string().as_deref() == Some("memory") {
        None
    } else if get(&store, "get").is_function() && get(&store, "save").is_function() {
        Some(store)
    } else {
        return Err(misuse(format!(
            "{WHAT}.store must be \"memory\" or an object {{get(id), save(task)}}"
        )));
    };
    let cors = get(&options, "cors");
    let cors = if cors.is_undefined() {
        Some(CorsOrigin::any())
    } else if cors.is_null() || cors.as_bool() == Some(false) {
        None
    } else {
        let origin = opt_string(&options, "cors", WHAT)?.unwrap_or_default();
        Some(CorsOrigin::parse(&origin).map_err(|e| misuse(format!("{WHAT}.cors: {e}")))?)
    };
    let heartbeat = opt_duration(&options, "heartbeatMs", Some(DEFAULT_HEARTBEAT))?;
    // A JS store outlives instances that die mid-task (an evicted isolate):
    // its abandoned tasks are failed when read. The memory store dies with them.
    let interrupted_default = store.is_some().then_some(DEFAULT_INTERRUPTED_AFTER);
    let interrupted_after = opt_duration(&options, "interruptedAfterMs", interrupted_default)?;
    // Tasks of a JS store hold a lease, renewed while they run here: another
    // isolate tells a live task from one whose isolate died. Its changes are
    // read again every `storePollMs` unless `store.watch` tells of them first.
    let shared = store.is_some().then_some(DEFAULT_LEASE);
    let lease = opt_duration(&options, "leaseMs", shared)?;
    let store_poll = opt_duration(
        &options,
        "storePollMs",
        store.is_some().then_some(DEFAULT_STORE_POLL),
    )?;
    // Finished tasks of a JS store are deleted after `retentionMs` (default
    // 7 days, as `toolnexus serve`), by stores that can (`deleteFinished`).
    let retention = opt_duration(
        &options,
        "retentionMs",
        shared.map(|_| toolnexus_core::server::DEFAULT_RETENTION),
    )?;
    let authenticate = opt_function(&options, "authenticate", WHAT)?;
    let (auth, jwt) = crate::auth::auth_config(&options, authenticate.is_some())?;
    let state = Rc::new(HandlerState::new(Parts {
        a2a: a2a_config(&get(&options, "a2a"))?,
        skills: skill_list(&skills),
        store,
        host: WasmHost {
            on_task: opt_function(&options, "onTask", WHAT)?,
            authenticate,
            jwt,
            on_span,
        },
        fulfiller,
        url: opt_string(&options, "url", WHAT)?,
        cors,
        heartbeat,
        interrupted_after,
        lease,
        store_poll,
        retention,
        auth,
        #[cfg(feature = "push")]
        push: push_options(&get(&options, "push"))?,
    }));
    let handler = Closure::<dyn Fn(JsValue, JsValue, JsValue) -> Promise>::new(
        move |request, second, third| state.clone().handle(request, second, third),
    );
    // The handler lives as long as the JS function does; wasm-bindgen frees
    // the closure with it.
    Ok(handler.into_js_value())
}

/// `options.push`: absent, `false` or `null` ⇒ none (the config methods
/// answer -32003); `true` ⇒ public webhooks only; `{allowPrivateWebhooks}`.
#[cfg(feature = "push")]
fn push_options(v: &JsValue) -> Result<Option<toolnexus_core::server::PushOptions>, JsValue> {
    if is_absent(v) || v.as_bool() == Some(false) {
        return Ok(None);
    }
    if v.as_bool() == Some(true) {
        return Ok(Some(Default::default()));
    }
    if !v.is_object() {
        return Err(misuse(
            "createA2AHandler options.push must be true, false or {allowPrivateWebhooks?}",
        ));
    }
    Ok(Some(toolnexus_core::server::PushOptions {
        allow_private_webhooks: get(v, "allowPrivateWebhooks").as_bool() == Some(true),
    }))
}
