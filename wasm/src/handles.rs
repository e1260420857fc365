//! Finding the Rust object behind a `Toolkit` or `Client` passed back inside
//! an option bag (`run(prompt, {toolkit})`, `createA2AHandler({client})`).
//!
//! wasm-bindgen can borrow an exported object only when it is a direct
//! argument; from inside a plain object it could only take it (and free the
//! JS side). So each such object registers its shared state under a number,
//! exposed as the hidden getter `__toolnexusHandle`, and unregisters on free.

#[cfg(feature = "server")]
use crate::convert::get;
use crate::toolkit::SharedToolkit;
use std::cell::Cell;
#[cfg(feature = "server")]
use std::cell::RefCell;
use std::rc::Rc;
#[cfg(feature = "server")]
use wasm_bindgen::JsValue;

/// What a handle stands for.
#[derive(Clone)]
pub enum Handle {
    Toolkit(Rc<SharedToolkit>),
    #[cfg(feature = "server")]
    Client(Rc<toolnexus_core::llm::LlmConfig>),
}

thread_local! {
    /// The live handles. A list, not a HashMap: a page holds a few toolkits
    /// and clients, and a HashMap would bring its own hasher into the .wasm.
    /// Only the full build looks them up: the client entry numbers its
    /// toolkits alike and keeps no list.
    #[cfg(feature = "server")]
    static HANDLES: RefCell<Vec<(u32, Handle)>> = const { RefCell::new(Vec::new()) };
    static NEXT: Cell<u32> = const { Cell::new(1) };
}

/// Registers `handle`; the caller keeps the number and calls [`release`] when freed.
pub fn register(handle: Handle) -> u32 {
    let id = NEXT.with(|n| {
        let id = n.get();
        n.set(id.wrapping_add(1).max(1));
        id
    });
    #[cfg(feature = "server")]
    HANDLES.with(|h| {
        let mut h = h.borrow_mut();
        // After a wrap of the counter, a number still in use is taken over (as insert did).
        h.retain(|(n, _)| *n != id);
        h.push((id, handle));
    });
    #[cfg(not(feature = "server"))]
    drop(handle);
    id
}

/// Forgets a handle (its JS object was freed).
pub fn release(id: u32) {
    #[cfg(feature = "server")]
    HANDLES.with(|h| h.borrow_mut().retain(|(n, _)| *n != id));
    #[cfg(not(feature = "server"))]
    let _ = id;
}

/// The handle of a `Toolkit` or `Client` object, if `v` is a live one.
#[cfg(feature = "server")]
pub fn find(v: &JsValue) -> Option<Handle> {
    let id = get(v, "__toolnexusHandle").as_f64()?;
    let id = id as u32;
    HANDLES.with(|h| {
        h.borrow()
            .iter()
            .find(|(n, _)| *n == id)
            .map(|(_, handle)| handle.clone())
    })
}
