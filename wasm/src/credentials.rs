//! Credentials of the agents JS calls: the `auth` / `allowedOrigins` of a
//! descriptor are the core's ([`toolnexus_core::Auth`]); this module adds
//! `getToken`, a JS function that gives a bearer token (a browser user's
//! login), and each agent's token cache cell (one per card and OAuth2
//! client, shared by the agent's tools in every toolkit and by `listTasks`).
//!
//! A `getToken` agent carries `auth: HostToken("N")`: the core asks the
//! host for a token before each call and once more after a 401
//! ([`toolnexus_core::Transport::host_token`]), and [`host_token`] awaits
//! function N. No protocol logic here.

use crate::convert::error_text;
use js_sys::{Function, Promise};
use std::cell::RefCell;
#[cfg(feature = "oauth2")]
use toolnexus_core::Lock;
use toolnexus_core::{Agent, Auth, SharedTokenCell};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

thread_local! {
    /// Each `getToken` function seen.
    static GET_TOKEN: RefCell<Vec<Function>> = const { RefCell::new(Vec::new()) };
    /// The token cache of each OAuth2 agent: its card URL and client.
    #[cfg(feature = "oauth2")]
    static CELLS: RefCell<Vec<(String, toolnexus_core::OAuth2Client, SharedTokenCell)>> =
        const { RefCell::new(Vec::new()) };
}

/// The most OAuth2 agents whose token caches are kept; past it the oldest
/// is forgotten (its next call fetches a token again).
#[cfg(feature = "oauth2")]
const MAX_CELLS: usize = 64;

/// The `auth` of an agent whose bearer token comes from `f`.
pub fn get_token_auth(f: Function) -> Auth {
    let n = GET_TOKEN.with(|g| {
        let mut g = g.borrow_mut();
        // The same function (===) keeps its slot.
        match g
            .iter()
            .position(|seen| JsValue::from(seen) == JsValue::from(&f))
        {
            Some(n) => n,
            None => {
                g.push(f);
                g.len() - 1
            }
        }
    });
    Auth::HostToken(n.to_string())
}

/// The slot of an agent's `getToken`, when its `auth` is one.
fn slot(agent: &Agent) -> Option<usize> {
    match &agent.auth {
        Some(Auth::HostToken(n)) => crate::convert::parse_usize(n),
        _ => None,
    }
}

/// The `getToken` function behind an agent's `auth`, to give it back in descriptors.
pub fn get_token_of(agent: &Agent) -> Option<Function> {
    let n = slot(agent)?;
    GET_TOKEN.with(|g| g.borrow().get(n).cloned())
}

/// A token from `getToken` number `key` (asked with `{retry}`: true after
/// the agent refused the previous one). A function that throws or gives no
/// non-empty string fails the call.
pub async fn host_token(key: String, retry: bool) -> Result<String, toolnexus_core::Error> {
    let fail = |why: String| toolnexus_core::Error::Misuse(format!("agent.getToken {why}"));
    let f = crate::convert::parse_usize(&key)
        .and_then(|n| GET_TOKEN.with(|g| g.borrow().get(n).cloned()))
        .ok_or_else(|| fail(format!("{} is unknown", toolnexus_core::quoted(&key))))?;
    let hint: JsValue = js_sys::Object::new().into();
    crate::convert::set(&hint, "retry", &retry.into());
    let returned = f
        .call1(&JsValue::UNDEFINED, &hint)
        .map_err(|e| fail(format!("threw: {}", error_text(&e))))?;
    JsFuture::from(Promise::resolve(&returned))
        .await
        .map_err(|e| fail(format!("failed: {}", error_text(&e))))?
        .as_string()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| fail("must resolve to a non-empty string".into()))
}

/// The token cache of `agent`: for OAuth2 client credentials, the one kept
/// for its card and client, so its tools (from any `agentTools` or toolkit)
/// and `listTasks` fetch one token between them; else a fresh one.
#[cfg(feature = "oauth2")]
pub fn token_cell_for(agent: &Agent) -> SharedTokenCell {
    let Some(Auth::OAuth2(client)) = &agent.auth else {
        return token_cell();
    };
    CELLS.with(|cells| {
        let mut cells = cells.borrow_mut();
        if let Some((_, _, cell)) = cells
            .iter()
            .find(|(card, c, _)| *card == agent.card && c == client)
        {
            return cell.clone();
        }
        if cells.len() >= MAX_CELLS {
            cells.remove(0);
        }
        let cell = token_cell();
        cells.push((agent.card.clone(), client.clone(), cell.clone()));
        cell
    })
}

/// The token cache an agent's tools and `listTasks` share. The client
/// entry keeps none: it has no OAuth2 client credentials, and `getToken`'s
/// tokens are asked for each call, never cached.
pub fn tokens_for(agent: &Agent) -> Option<SharedTokenCell> {
    #[cfg(feature = "oauth2")]
    return Some(token_cell_for(agent));
    #[cfg(not(feature = "oauth2"))]
    {
        let _ = agent;
        None
    }
}

/// A fresh token cache cell.
#[cfg(feature = "oauth2")]
fn token_cell() -> SharedTokenCell {
    // Nothing crosses threads in the JS host.
    #[allow(clippy::arc_with_non_send_sync)]
    let cell: SharedTokenCell = std::sync::Arc::new(toolnexus_core::CellLock::new(
        toolnexus_core::TokenCache::new(),
    ));
    cell
}
