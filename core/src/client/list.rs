//! ListTasks from the client side (A2A 1.0; 0.3 has no such method): the
//! request, a page read back, and [`list_tasks`], which follows the pages.

use crate::client::auth::{plan, AuthPlan, PlanCredential, TokenCell};
use crate::client::card::AgentCard;
use crate::client::toolkit::{route, CredentialRoute};
use crate::error::Error;
use crate::host::transport::Transport;
use crate::model::agent::{expand_env, Agent};
use crate::model::task::{Task, TaskState};
use crate::wire::http::HttpRequest;
use crate::wire::json::{object, with};
use crate::wire::rpc::{Dialect, Method};
use serde_json::Value;

/// Which tasks to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only the tasks of this context.
    pub context_id: Option<String>,
    /// Only the tasks in this state.
    pub status: Option<TaskState>,
}

/// The tasks a peer listed, newest status change first (as it ordered them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskList {
    pub tasks: Vec<Task>,
    /// How many tasks match, as the peer counted them.
    pub total_size: Option<u64>,
    /// More pages were left unread (past [`MAX_PAGES`]).
    pub truncated: bool,
}

/// The most pages [`list_tasks`] reads (of up to 100 tasks each).
pub const MAX_PAGES: usize = 20;

/// A ListTasks request for one page (`page_token` from the previous one).
pub fn list_request(
    endpoint: &str,
    rpc_id: u64,
    filter: &ListFilter,
    page_token: Option<&str>,
) -> HttpRequest {
    // Artifacts are left out unless asked for; a caller listing tasks wants their answers.
    let mut params = object([("pageSize", 100.into()), ("includeArtifacts", true.into())]);
    if let Some(c) = &filter.context_id {
        params = with(params, "contextId", c.as_str().into());
    }
    if let Some(s) = filter.status {
        params = with(params, "status", s.as_v10().into());
    }
    if let Some(t) = page_token.filter(|t| !t.is_empty()) {
        params = with(params, "pageToken", t.into());
    }
    Dialect::V10.request(endpoint, rpc_id, Method::List, params)
}

/// [`list_request`] in `dialect`: over HTTP+JSON, `GET /tasks?…`.
fn list_request_in(
    dialect: Dialect,
    endpoint: &str,
    rpc_id: u64,
    filter: &ListFilter,
    page_token: Option<&str>,
) -> HttpRequest {
    let req = list_request(endpoint, rpc_id, filter, page_token);
    if !dialect.is_rest() {
        return req;
    }
    let params = serde_json::from_slice::<Value>(&req.body)
        .ok()
        .and_then(|mut b| b.get_mut("params").map(Value::take))
        .unwrap_or(Value::Null);
    crate::wire::rest::list(endpoint, &params)
}

/// One ListTasks result: its tasks, the next page's token (empty at the
/// end) and the total; `None` when it is not a ListTasks result.
pub fn read_page(v: &Value) -> Option<(Vec<Task>, String, Option<u64>)> {
    let list = v.get("tasks")?.as_array()?;
    // A plain loop, not an iterator chain (see ARCHITECTURE.md).
    let mut tasks = Vec::with_capacity(list.len());
    for t in list {
        if let Some(t) = Task::from_value(t) {
            tasks.push(t);
        }
    }
    Some((
        tasks,
        crate::model::task::text_of(v, "nextPageToken").unwrap_or_default(),
        v.get("totalSize").and_then(Value::as_u64),
    ))
}

/// The expanded headers and the credential plan of a ListTasks.
type Credentials = (Vec<(String, String)>, Option<AuthPlan>);

/// Where the ListTasks credentials go: the expanded headers, and the
/// credential plan (none when withheld).
fn credentials<T: Transport>(
    transport: &T,
    agent: &Agent,
    card: &AgentCard,
    endpoint: &str,
) -> Result<Credentials, Error> {
    match route(agent, endpoint, card.requires_credentials(), "ListTasks") {
        CredentialRoute::Refuse(e) => Err(e),
        CredentialRoute::Withhold(_) => Ok((Vec::new(), None)),
        CredentialRoute::Send => Ok((
            agent.expanded_headers(|n| transport.env(n)),
            plan(
                agent.auth.as_ref(),
                &agent.card,
                &card.security_schemes,
                &card.security_requirements,
            )?,
        )),
    }
}

/// Lists the tasks of the agent behind `card` that match `filter`, page by
/// page (up to [`MAX_PAGES`]). Credentials go as for a call
/// ([`crate::A2aTool::credential_route`]: hosts show the warning of
/// [`crate::client::toolkit::route`]); an OAuth2 token refused with 401 is
/// fetched again once. `tokens`: the agent's token cache, the one its tools
/// use ([`crate::A2aTool::with_tokens`]), so listing fetches no token of its
/// own while theirs is fresh; without it each listing fetches one.
pub async fn list_tasks<T: Transport>(
    transport: &T,
    agent: &Agent,
    card: &AgentCard,
    filter: &ListFilter,
    tokens: Option<&dyn TokenCell>,
) -> Result<TaskList, Error> {
    let (dialect, endpoint) = card.endpoint_for(&agent.card, agent.binding);
    let (headers, plan) = credentials(transport, agent, card, &endpoint)?;
    let deadline_ms = transport.now_ms().saturating_add(agent.timeout_ms());
    let mut credential = match plan.as_ref().map(|p| &p.credential) {
        Some(PlanCredential::Static(v)) => Some(expand_env(v, |n| transport.env(n))),
        _ => None,
    };
    let source = match plan.as_ref().map(|p| &p.credential) {
        Some(PlanCredential::Token(source)) => Some(source),
        _ => None,
    };
    let mut list = TaskList::default();
    let mut token = String::new();
    let mut refetched = false;
    // The token the agent refused with 401, so the source knows to renew it.
    let mut refused: Option<String> = None;
    let mut page = 0;
    while page < MAX_PAGES {
        if let (Some(source), None) = (source, &credential) {
            let stale = refused.as_deref();
            credential = Some(
                crate::client::auth::token(transport, tokens, source, stale, deadline_ms)
                    .await?
                    .value,
            );
        }
        let mut req = list_request_in(dialect, &endpoint, page as u64 + 1, filter, Some(&token));
        for (k, v) in &headers {
            req = req.with_header(k, v);
        }
        if let (Some(plan), Some(c)) = (&plan, &credential) {
            req = plan.placement.apply(req, c);
        }
        let resp = transport.send(req).await?;
        if resp.status == 401 && source.is_some() && !refetched {
            refetched = true;
            refused = credential.take();
            continue;
        }
        page += 1;
        let result = dialect.read_reply(&resp, &endpoint)?;
        let (tasks, next, total) = read_page(&result).ok_or_else(|| {
            Error::malformed(format!(
                "the ListTasks answer has no tasks: {}",
                crate::wire::json::text(&result)
            ))
        })?;
        list.tasks.extend(tasks);
        list.total_size = total.or(list.total_size);
        if next.is_empty() || next == token {
            return Ok(list);
        }
        token = next;
    }
    list.truncated = true;
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{block_on, Reply, ScriptedPeer};
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn pages_are_followed_with_the_filter_and_the_token() {
        let t = |id: &str| json!({"id": id, "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}});
        let peer = ScriptedPeer::new().on(
            "ListTasks",
            vec![
                Reply::Result(json!({"tasks": [t("a"), t("b")], "nextPageToken": "p2", "pageSize": 2, "totalSize": 3})),
                Reply::Result(json!({"tasks": [t("c")], "nextPageToken": "", "pageSize": 2, "totalSize": 3})),
            ],
        );
        let card =
            AgentCard::from_value(&json!({"name": "n", "url": "http://peer/", "skills": []}))
                .expect("card");
        let agent = Agent::new("http://peer/.well-known/agent-card.json");
        let filter = ListFilter {
            context_id: Some("c".into()),
            status: Some(TaskState::Completed),
        };
        let list = block_on(list_tasks(&peer, &agent, &card, &filter, None)).expect("listed");
        let ids: Vec<&str> = list.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(list.total_size, Some(3));
        let reqs = peer.requests();
        let bodies: Vec<Value> = reqs
            .iter()
            .map(|(_, r)| serde_json::from_slice(&r.body).expect("json"))
            .collect();
        assert_eq!(
            bodies[0]["params"],
            json!({"pageSize": 100, "includeArtifacts": true, "contextId": "c", "status": "TASK_STATE_COMPLETED"})
        );
        assert_eq!(bodies[1]["params"]["pageToken"], "p2");
        assert_eq!(reqs[0].1.header("A2A-Version"), Some("1.0"));
    }

    #[test]
    fn an_answer_without_tasks_is_malformed() {
        let peer = ScriptedPeer::new().on("ListTasks", vec![Reply::Result(json!({"id": "t"}))]);
        let card =
            AgentCard::from_value(&json!({"name": "n", "url": "http://peer/", "skills": []}))
                .expect("card");
        let agent = Agent::new("http://peer/.well-known/agent-card.json");
        let err = block_on(list_tasks(
            &peer,
            &agent,
            &card,
            &ListFilter::default(),
            None,
        ));
        assert!(matches!(err, Err(Error::Malformed(_))), "{err:?}");
    }
}
