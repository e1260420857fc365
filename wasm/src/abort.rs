//! An `AbortSignal` as the future the core's call loop races against.

use crate::convert::{get, is_absent, misuse};
use js_sys::{Function, Promise};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

#[wasm_bindgen]
extern "C" {
    /// Anything with `aborted` and `add/removeEventListener` (an
    /// `AbortSignal` from any realm or polyfill).
    type SignalLike;
    #[wasm_bindgen(method, getter)]
    fn aborted(this: &SignalLike) -> JsValue;
    #[wasm_bindgen(method, js_name = addEventListener)]
    fn add_event_listener(this: &SignalLike, kind: &str, listener: &Function);
    #[wasm_bindgen(method, js_name = removeEventListener)]
    fn remove_event_listener(this: &SignalLike, kind: &str, listener: &Function);
}

/// Completes when the signal fires (at once if it already has); never when
/// there is no signal. Dropping it removes its listener, so a long-lived
/// signal shared by many calls does not collect listeners.
pub struct Abort {
    state: State,
}

enum State {
    Never,
    Fired,
    Waiting {
        signal: SignalLike,
        listener: Function,
        fired: JsFuture,
    },
}

impl Abort {
    /// From `options.signal` of `execute(args, options)`; `options` may be absent.
    pub fn from_options(options: &JsValue) -> Result<Abort, JsValue> {
        let signal = get(options, "signal");
        if is_absent(&signal) {
            return Ok(Abort {
                state: State::Never,
            });
        }
        if !get(&signal, "addEventListener").is_function() {
            return Err(misuse("options.signal must be an AbortSignal"));
        }
        let signal: SignalLike = signal.unchecked_into();
        if signal.aborted().is_truthy() {
            return Ok(Abort {
                state: State::Fired,
            });
        }
        let mut resolve = None;
        let promise = Promise::new(&mut |res, _rej| resolve = Some(res));
        // The executor runs synchronously, so `resolve` is set; stay inert otherwise.
        let Some(listener) = resolve else {
            return Ok(Abort {
                state: State::Never,
            });
        };
        signal.add_event_listener("abort", &listener);
        Ok(Abort {
            state: State::Waiting {
                signal,
                listener,
                fired: JsFuture::from(promise),
            },
        })
    }
}

impl Future for Abort {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match &mut self.get_mut().state {
            State::Never => Poll::Pending,
            State::Fired => Poll::Ready(()),
            State::Waiting { fired, .. } => Pin::new(fired).poll(cx).map(|_| ()),
        }
    }
}

impl Drop for Abort {
    fn drop(&mut self) {
        if let State::Waiting {
            signal, listener, ..
        } = &self.state
        {
            signal.remove_event_listener("abort", listener);
        }
    }
}
