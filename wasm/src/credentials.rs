//! Credentials of the agents JS calls: the `auth` / `allowedOrigins` of a
//! descriptor are the core's ([`toolnexus_core::Auth`]); this module adds
//! `getToken`, a JS function that gives a bearer token (a browser user's
//! login), and each agent's token cache cell.
//!
//! A `getToken` agent carries `auth: Bearer("${__toolnexus_get_token_N}")`:
//! before each call the host awaits the function and keeps its answer, and
//! the core expands the placeholder through [`token_var`] as it expands any
//! `${NAME}`, at call time. No protocol logic here.

use crate::convert::{error_text, misuse};
use js_sys::{Function, Promise};
use std::cell::RefCell;
use toolnexus_core::{Agent, Auth, Lock, SharedTokenCell};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

const PREFIX: &str = "__toolnexus_get_token_";

thread_local! {
    /// Each `getToken` function seen, and the token it gave last.
    static GET_TOKEN: RefCell<Vec<(Function, Option<String>)>> = const { RefCell::new(Vec::new()) };
}

/// The `auth` of an agent whose bearer token comes from `f`.
pub fn get_token_auth(f: Function) -> Auth {
    let n = GET_TOKEN.with(|g| {
        let mut g = g.borrow_mut();
        // The same function (===) keeps its slot.
        match g
            .iter()
            .position(|(seen, _)| JsValue::from(seen) == JsValue::from(&f))
        {
            Some(n) => n,
            None => {
                g.push((f, None));
                g.len() - 1
            }
        }
    });
    Auth::Bearer(format!("${{{PREFIX}{n}}}"))
}

/// The slot of an agent's `getToken`, when its `auth` is one.
fn slot(agent: &Agent) -> Option<usize> {
    match &agent.auth {
        Some(Auth::Bearer(t)) => t
            .strip_prefix("${")?
            .strip_prefix(PREFIX)?
            .strip_suffix('}')?
            .parse()
            .ok(),
        _ => None,
    }
}

/// The `getToken` function behind an agent's `auth`, to give it back in descriptors.
pub fn get_token_of(agent: &Agent) -> Option<Function> {
    let n = slot(agent)?;
    GET_TOKEN.with(|g| g.borrow().get(n).map(|(f, _)| f.clone()))
}

/// `${__toolnexus_get_token_N}`: the token agent N's function gave last.
pub fn token_var(name: &str) -> Option<Option<String>> {
    let n: usize = name.strip_prefix(PREFIX)?.parse().ok()?;
    Some(GET_TOKEN.with(|g| g.borrow().get(n).and_then(|(_, t)| t.clone())))
}

/// Before a call: asks the agent's `getToken` (if it has one) for a token.
/// A function that throws or gives no non-empty string fails the call.
pub async fn refresh(agent: &Agent) -> Result<(), JsValue> {
    let Some(n) = slot(agent) else { return Ok(()) };
    let Some(f) = GET_TOKEN.with(|g| g.borrow().get(n).map(|(f, _)| f.clone())) else {
        return Ok(());
    };
    let fail = |why: String| misuse(format!("agent.getToken {why}"));
    let returned = f
        .call0(&JsValue::UNDEFINED)
        .map_err(|e| fail(format!("threw: {}", error_text(&e))))?;
    let token = JsFuture::from(Promise::resolve(&returned))
        .await
        .map_err(|e| fail(format!("failed: {}", error_text(&e))))?
        .as_string()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| fail("must resolve to a non-empty string".into()))?;
    GET_TOKEN.with(|g| {
        if let Some(entry) = g.borrow_mut().get_mut(n) {
            entry.1 = Some(token);
        }
    });
    Ok(())
}

/// A fresh token cache cell: one per agent, shared by its tools' calls.
pub fn token_cell() -> SharedTokenCell {
    // Nothing crosses threads in the JS host.
    #[allow(clippy::arc_with_non_send_sync)]
    let cell: SharedTokenCell = std::sync::Arc::new(toolnexus_core::CellLock::new(
        toolnexus_core::TokenCache::new(),
    ));
    cell
}
