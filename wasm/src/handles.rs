//! Finding the Rust object behind a `Toolkit` or `Client` passed back inside
//! an option bag (`run(prompt, {toolkit})`, `createA2AHandler({client})`).
//!
//! wasm-bindgen can borrow an exported object only when it is a direct
//! argument; from inside a plain object it could only take it (and free the
//! JS side). So each such object registers its shared state under a number,
//! exposed as the hidden getter `__toolnexusHandle`, and unregisters on free.

use crate::convert::get;
use crate::toolkit::SharedToolkit;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use wasm_bindgen::JsValue;

/// What a handle stands for.
#[derive(Clone)]
pub enum Handle {
    Toolkit(Rc<SharedToolkit>),
    #[cfg(feature = "server")]
    Client(Rc<toolnexus_core::llm::LlmConfig>),
}

thread_local! {
    static HANDLES: RefCell<HashMap<u32, Handle>> = RefCell::new(HashMap::new());
    static NEXT: Cell<u32> = const { Cell::new(1) };
}

/// Registers `handle`; the caller keeps the number and calls [`release`] when freed.
pub fn register(handle: Handle) -> u32 {
    let id = NEXT.with(|n| {
        let id = n.get();
        n.set(id.wrapping_add(1).max(1));
        id
    });
    HANDLES.with(|h| h.borrow_mut().insert(id, handle));
    id
}

/// Forgets a handle (its JS object was freed).
pub fn release(id: u32) {
    HANDLES.with(|h| h.borrow_mut().remove(&id));
}

/// The handle of a `Toolkit` or `Client` object, if `v` is a live one.
pub fn find(v: &JsValue) -> Option<Handle> {
    let id = get(v, "__toolnexusHandle").as_f64()?;
    HANDLES.with(|h| h.borrow().get(&(id as u32)).cloned())
}
