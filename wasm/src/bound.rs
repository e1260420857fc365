//! Futures polled in the JS context that made them.
//!
//! workerd runs each request in its own I/O context: a store call made while
//! another request's code runs belongs to that request and is canceled when
//! it ends. wasm-bindgen-futures polls a woken future from a microtask of
//! whoever woke it, so a stream or long-poll woken by another request's
//! save (a CancelTask through the same isolate) would read the store on
//! behalf of that request and hang once it ended. Here each poll first
//! awaits a promise made during the previous poll, in the future's own
//! context; the waker resolves it, and workerd runs the reaction (the next
//! poll) in the context that made it.
//!
//! workerd also cancels a request as hung when nothing of its own is
//! pending (a CancelTask waiting for the job that runs the task in another
//! request's context, issue 20): while the future is pending, a timer of its
//! own context stays armed (unref'd in Node, so it never holds a process).
//!
//! That deferral is not to be relied on: under load workerd (1.20260426)
//! stops deferring, for the rest of the isolate's life, and runs the
//! reaction in the context of whoever woke the future (seen in the 1,000
//! cancel races: the job's save of `canceled` ran in the CancelTask's
//! context, "Cannot perform I/O on behalf of a different request", and the
//! CancelTask's `Response` was made in the job's context, an HTTP 500). So
//! each poll first checks it runs at home, through an `AbortSignal` made
//! with the future (workerd binds it to its context; reading `aborted`
//! elsewhere throws; Node and browsers never throw). A wake that arrives
//! elsewhere is only noted, and the future's own timer polls it at home:
//! from then on that timer fires every [`STRAY_MS`] instead of every
//! [`KEEP_ALIVE_MS`].

use crate::convert::JsResultFuture;
use js_sys::{Function, Promise};
use std::cell::RefCell;
use std::rc::Rc;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

struct Task {
    fut: RefCell<Option<JsResultFuture>>,
    resolve: Function,
    reject: Function,
    /// Whether the keep-alive timer is armed.
    timer: std::cell::Cell<bool>,
    /// Made in the future's own context (see the module notes).
    home: JsValue,
    /// A wake reached the future outside its context: its timer polls it.
    stray: std::cell::Cell<bool>,
}

/// How often the keep-alive timer of a pending future fires.
const KEEP_ALIVE_MS: i32 = 1000;

/// How often it fires once a wake went astray in this isolate.
const STRAY_MS: i32 = 20;

thread_local! {
    /// Whether a wake ever reached a future outside its context here.
    static STRAYED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// An `AbortSignal` of the current context (undefined without one).
fn home_signal() -> JsValue {
    let ctor = crate::convert::get(&js_sys::global(), "AbortSignal");
    match crate::convert::get(&ctor, "abort").dyn_ref::<Function>() {
        Some(abort) => abort.call0(&ctor).unwrap_or(JsValue::UNDEFINED),
        None => JsValue::UNDEFINED,
    }
}

/// Whether this runs in the context that made `home`.
fn at_home(home: &JsValue) -> bool {
    home.is_undefined() || js_sys::Reflect::get(home, &"aborted".into()).is_ok()
}

/// `fut` as a promise whose every poll runs in the JS context that called this.
pub fn promise(fut: JsResultFuture) -> Promise {
    let mut fut = Some(fut);
    Promise::new(&mut |resolve, reject| {
        poll(Rc::new(Task {
            fut: RefCell::new(fut.take()),
            resolve,
            reject,
            timer: std::cell::Cell::new(false),
            home: home_signal(),
            stray: std::cell::Cell::new(false),
        }))
    })
}

fn poll(task: Rc<Task>) {
    if !at_home(&task.home) {
        // Woken from another request's context: its timer polls it at home.
        task.stray.set(true);
        STRAYED.with(|s| s.set(true));
        return;
    }
    task.stray.set(false);
    // The next wake-up: a promise made here, its reaction registered here.
    let mut wake = None;
    let next = Promise::new(&mut |resolve, _| wake = Some(resolve));
    let Some(wake) = wake else { return };
    let again = task.clone();
    let reaction = Closure::once_into_js(move |_: JsValue| poll(again));
    let then: Function = crate::convert::get(&next, "then").unchecked_into();
    let _ = then.call1(&next, &reaction);
    let waker = waker(Rc::new(wake.clone()));
    let polled = match task.fut.borrow_mut().as_mut() {
        Some(fut) => fut.as_mut().poll(&mut Context::from_waker(&waker)),
        None => return,
    };
    if polled.is_pending() {
        keep_alive(task);
    } else if let Poll::Ready(result) = polled {
        task.fut.borrow_mut().take();
        let _ = match result {
            Ok(v) => task.resolve.call1(&JsValue::UNDEFINED, &v),
            Err(e) => task.reject.call1(&JsValue::UNDEFINED, &e),
        };
        // Lets the pending reaction run (and find nothing), freeing it.
        let _ = wake.call0(&JsValue::UNDEFINED);
    }
}

/// Arms the task's keep-alive timer (in this context) unless it is armed;
/// it re-arms itself while the future is pending.
fn keep_alive(task: Rc<Task>) {
    if task.timer.replace(true) {
        return;
    }
    let global = js_sys::global();
    let set_timeout = crate::convert::get(&global, "setTimeout");
    let Some(set_timeout) = set_timeout.dyn_ref::<Function>() else {
        return;
    };
    let again = task.clone();
    let fire = Closure::once_into_js(move || {
        again.timer.set(false);
        if again.stray.get() {
            poll(again);
        } else if again.fut.borrow().is_some() {
            keep_alive(again);
        }
    });
    let ms = if STRAYED.with(|s| s.get()) {
        STRAY_MS
    } else {
        KEEP_ALIVE_MS
    };
    if let Ok(handle) = set_timeout.call2(&global, &fire, &ms.into()) {
        // Node: the timer alone does not keep the process running.
        if let Some(unref) = crate::convert::get(&handle, "unref").dyn_ref::<Function>() {
            let _ = unref.call0(&handle);
        }
    }
}

fn waker(wake: Rc<Function>) -> Waker {
    // SAFETY: the vtable below keeps the Rc's count (wasm32 has one thread:
    // the waker never crosses threads).
    unsafe { Waker::from_raw(raw(wake)) }
}

fn raw(wake: Rc<Function>) -> RawWaker {
    RawWaker::new(Rc::into_raw(wake).cast(), &VTABLE)
}

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop_waker);

unsafe fn clone(p: *const ()) -> RawWaker {
    // SAFETY: `p` came from `Rc::into_raw` in `raw`.
    unsafe { Rc::increment_strong_count(p.cast::<Function>()) };
    RawWaker::new(p, &VTABLE)
}

unsafe fn wake(p: *const ()) {
    // SAFETY: `p` came from `Rc::into_raw`; this consumes that count.
    let f = unsafe { Rc::from_raw(p.cast::<Function>()) };
    let _ = f.call0(&JsValue::UNDEFINED);
}

unsafe fn wake_by_ref(p: *const ()) {
    // SAFETY: `p` points at a live Function (the waker holds a count).
    let f = unsafe { &*p.cast::<Function>() };
    let _ = f.call0(&JsValue::UNDEFINED);
}

unsafe fn drop_waker(p: *const ()) {
    // SAFETY: `p` came from `Rc::into_raw`; this releases that count.
    drop(unsafe { Rc::from_raw(p.cast::<Function>()) });
}
