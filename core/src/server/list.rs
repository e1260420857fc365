//! ListTasks: the params read and checked, and one page of tasks, newest
//! status change first. As a machine ([`ListMachine`]): one page read from a
//! store that pages, else every match from one that lists, else refused;
//! no store and no futures in it. [`super::A2aServer::list`] is its driver.
//! A flow of two reads, so each input returns what comes next by type (a
//! step enum cost the npm `.wasm` 0.3 KB gzip).

use super::rpc::{self, RpcError};
use super::store::{StoreError, TaskFilter};
use super::store_failed;
use crate::model::task::{Shape, Task, TaskState};
use crate::wire::json::quoted;
use serde::ser::SerializeMap;
use serde_json::Value;

/// The page size when none is asked for.
pub const DEFAULT_PAGE_SIZE: usize = 50;
/// The largest page size.
pub const MAX_PAGE_SIZE: usize = 100;

/// Orders tasks newest status change first; ties by id, so the order is
/// total. (The one sort of tasks in the server: each sort is its own code in the `.wasm`.)
pub(crate) fn newest_first(tasks: &mut [Task]) {
    // A heap sort in place: the standard stable sort adds kilobytes to the
    // npm `.wasm`, and with a total order stability does not matter.
    let first = |a: &Task, b: &Task| {
        (a.updated_ms.unwrap_or(0), &a.id) > (b.updated_ms.unwrap_or(0), &b.id)
    };
    let sift = |v: &mut [Task], mut i: usize, end: usize| loop {
        let mut child = 2 * i + 1;
        if child >= end {
            break;
        }
        if child + 1 < end && first(&v[child], &v[child + 1]) {
            child += 1;
        }
        if !first(&v[i], &v[child]) {
            break;
        }
        v.swap(i, child);
        i = child;
    };
    let n = tasks.len();
    for i in (0..n / 2).rev() {
        sift(tasks, i, n);
    }
    for end in (1..n).rev() {
        tasks.swap(0, end);
        sift(tasks, 0, end);
    }
}

/// What a ListTasks call asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListQuery {
    pub(crate) filter: TaskFilter,
    pub(crate) page_size: usize,
    /// Start after this task (its status time and id), from a page token.
    pub(crate) after: Option<(u64, String)>,
    pub(crate) history_length: Option<usize>,
    pub(crate) include_artifacts: bool,
}

impl ListQuery {
    /// Reads the params; anything malformed is -32602.
    pub(crate) fn parse(params: &Value) -> Result<ListQuery, RpcError> {
        let text = |key: &str| -> Result<Option<&str>, RpcError> {
            match params.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.as_str())),
                Some(_) => Err(RpcError::invalid_params(&format!("{key} must be a string"))),
            }
        };
        let state = match text("status")? {
            None | Some("TASK_STATE_UNSPECIFIED") => None,
            Some(s) => match TaskState::parse(s) {
                TaskState::Unknown => {
                    return Err(RpcError::invalid_params(&format!(
                        "status {} is not a task state",
                        quoted(s)
                    )))
                }
                state => Some(state),
            },
        };
        let updated_after_ms = match text("statusTimestampAfter")? {
            None => None,
            Some(t) => Some(crate::model::time::parse_rfc3339(t).ok_or_else(|| {
                RpcError::invalid_params(&format!(
                    "statusTimestampAfter {} is not an RFC 3339 timestamp",
                    quoted(t)
                ))
            })?),
        };
        let page_size = match params.get("pageSize") {
            None | Some(Value::Null) => DEFAULT_PAGE_SIZE,
            Some(v) => match v.as_u64() {
                Some(n @ 1..=100) => n as usize,
                _ => {
                    return Err(RpcError::invalid_params(&format!(
                        "pageSize must be a whole number from 1 to {MAX_PAGE_SIZE}"
                    )))
                }
            },
        };
        let after =
            match text("pageToken")? {
                None | Some("") => None,
                Some(token) => Some(decode_token(token).ok_or_else(|| {
                    RpcError::invalid_params("pageToken is not one this agent gave")
                })?),
            };
        let history_length =
            match params.get("historyLength") {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.as_u64().ok_or_else(|| {
                    RpcError::invalid_params("historyLength must be a whole number")
                })? as usize),
            };
        let include_artifacts = match params.get("includeArtifacts") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(RpcError::invalid_params(
                    "includeArtifacts must be a boolean",
                ))
            }
        };
        Ok(ListQuery {
            filter: TaskFilter {
                context_id: text("contextId")?.map(str::to_string),
                state,
                updated_after_ms,
                owner: None,
            },
            page_size,
            after,
            history_length,
            include_artifacts,
        })
    }

    /// The page of `tasks` (as a store listed them) this query asks for.
    pub(crate) fn page(&self, mut tasks: Vec<Task>, shape: Shape) -> Page {
        tasks.retain(|t| self.filter.matches(t));
        newest_first(&mut tasks);
        let key = |t: &Task| (t.updated_ms.unwrap_or(0), t.id.clone());
        let total_size = tasks.len();
        let start = match &self.after {
            // After the cursor in that order, even if its task is gone.
            Some(cursor) => tasks.partition_point(|t| key(t) >= *cursor),
            None => 0,
        };
        let rest = tasks.split_off(start.min(tasks.len()));
        self.paged(rest, total_size, shape)
    }

    /// The page made of `rest` (the tasks from the cursor on, in order; at
    /// least one more than the page when there are more), of `total_size`.
    pub(crate) fn paged(&self, mut rest: Vec<Task>, total_size: usize, shape: Shape) -> Page {
        let more = rest.len() > self.page_size;
        rest.truncate(self.page_size);
        let next_page_token = match rest.last() {
            Some(last) if more => encode_token(last.updated_ms.unwrap_or(0), &last.id),
            _ => String::new(),
        };
        if !self.include_artifacts {
            for t in &mut rest {
                t.artifacts.clear();
            }
        }
        Page {
            tasks: rest,
            shape,
            history_length: self.history_length,
            next_page_token,
            page_size: self.page_size,
            total_size,
        }
    }
}

/// One ListTasks call: its query, the caller's tasks only.
pub(crate) struct ListMachine {
    query: ListQuery,
    shape: Shape,
}

impl ListMachine {
    /// A ListTasks of `params` in `shape` for `owner` (`None`: every task,
    /// nobody being authenticated); malformed params are -32602. First,
    /// one page is read ([`ListMachine::page_query`]) for
    /// [`ListMachine::handle_page`].
    pub(crate) fn new(
        params: &Value,
        shape: Shape,
        owner: Option<&str>,
    ) -> Result<ListMachine, RpcError> {
        let mut query = ListQuery::parse(params)?;
        // The caller's tasks only, chosen by the store as it lists.
        query.filter.owner = owner.map(str::to_string);
        Ok(ListMachine { query, shape })
    }

    /// The tasks listed: those [`TaskFilter`] matches.
    pub(crate) fn filter(&self) -> &TaskFilter {
        &self.query.filter
    }

    /// The page to read: the filter, the cursor to start after, and how
    /// many (one more than the page, to tell whether more follow).
    pub(crate) fn page_query(&self) -> (&TaskFilter, Option<(u64, &str)>, usize) {
        let after = self.query.after.as_ref().map(|(ms, id)| (*ms, id.as_str()));
        (&self.query.filter, after, self.query.page_size + 1)
    }

    /// The store's page and total: the answer; `Ok(None)`: the store
    /// cannot page, so every match ([`ListMachine::filter`]) is read for
    /// [`ListMachine::handle_all`].
    pub(crate) fn handle_page(
        &mut self,
        read: Result<Option<(Vec<Task>, usize)>, StoreError>,
    ) -> Result<Option<Page>, RpcError> {
        match read {
            Ok(Some((tasks, total))) => Ok(Some(self.query.paged(tasks, total, self.shape))),
            Ok(None) => Ok(None),
            Err(e) => Err(store_failed(e)),
        }
    }

    /// Every match (`None`: the store cannot list either): the answer.
    pub(crate) fn handle_all(
        &mut self,
        read: Result<Option<Vec<Task>>, StoreError>,
    ) -> Result<Page, RpcError> {
        match read {
            Ok(Some(tasks)) => Ok(self.query.page(tasks, self.shape)),
            Ok(None) => Err(RpcError::new(
                rpc::UNSUPPORTED_OPERATION,
                "this agent's task store cannot list tasks",
            )),
            Err(e) => Err(store_failed(e)),
        }
    }
}

/// One page of a ListTasks answer.
pub(crate) struct Page {
    tasks: Vec<Task>,
    shape: Shape,
    history_length: Option<usize>,
    next_page_token: String,
    page_size: usize,
    total_size: usize,
}

impl serde::Serialize for Page {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Tasks<'a>(&'a Page);
        impl serde::Serialize for Tasks<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let p = self.0;
                s.collect_seq(p.tasks.iter().map(|t| t.shaped(p.shape, p.history_length)))
            }
        }
        let mut map = s.serialize_map(Some(4))?;
        map.serialize_entry("tasks", &Tasks(self))?;
        map.serialize_entry("nextPageToken", &self.next_page_token)?;
        map.serialize_entry("pageSize", &self.page_size)?;
        map.serialize_entry("totalSize", &self.total_size)?;
        map.end()
    }
}

/// An opaque token for "after this task": hex of `<ms>:<id>`.
fn encode_token(ms: u64, id: &str) -> String {
    format!("{ms}:{id}")
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn decode_token(token: &str) -> Option<(u64, String)> {
    if token.len() % 2 != 0 || token.len() > 1024 {
        return None;
    }
    let mut bytes = Vec::with_capacity(token.len() / 2);
    // A plain loop, not an iterator chain (see ARCHITECTURE.md).
    for i in (0..token.len()).step_by(2) {
        bytes.push(u8::from_str_radix(token.get(i..i + 2)?, 16).ok()?);
    }
    let text = String::from_utf8(bytes).ok()?;
    let (ms, id) = text.split_once(':')?;
    Some((ms.parse().ok()?, id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn tokens_round_trip_and_strangers_are_refused() {
        let t = encode_token(1_764_547_200_000, "a-b:c");
        assert_eq!(decode_token(&t), Some((1_764_547_200_000, "a-b:c".into())));
        for bad in ["zz", "abc", "3a", &"00".repeat(600)] {
            assert_eq!(decode_token(bad), None, "{bad}");
        }
    }

    #[test]
    fn malformed_params_are_invalid() {
        for params in [
            json!({"pageSize": 0}),
            json!({"pageSize": 101}),
            json!({"pageSize": 2.5}),
            json!({"status": "sleeping"}),
            json!({"statusTimestampAfter": "yesterday"}),
            json!({"pageToken": "not hex"}),
            json!({"includeArtifacts": "yes"}),
            json!({"contextId": 5}),
        ] {
            let err = ListQuery::parse(&params).expect_err("invalid");
            assert_eq!(err.code, crate::wire::rpc::INVALID_PARAMS, "{params}");
        }
        let q =
            ListQuery::parse(&json!({"status": "TASK_STATE_WORKING", "pageSize": 100})).unwrap();
        assert_eq!(
            (q.filter.state, q.page_size),
            (Some(TaskState::Working), 100)
        );
        assert_eq!(
            ListQuery::parse(&json!({})).unwrap().page_size,
            DEFAULT_PAGE_SIZE
        );
    }
}

#[cfg(test)]
mod machine_tests {
    //! The list machine alone: its steps for given store answers.
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn task(id: &str, ms: u64) -> Task {
        let mut t =
            Task::from_value(&json!({"id": id, "status": {"state": "completed"}})).expect("task");
        t.updated_ms = Some(ms);
        t.owner = Some("alice".into());
        t
    }

    #[test]
    fn a_paging_store_is_asked_one_page_past_the_cursor_for_the_callers_tasks() {
        let token = encode_token(9, "t9");
        let params = json!({"pageSize": 2, "pageToken": token});
        let mut m = ListMachine::new(&params, Shape::V10, Some("alice")).expect("ok");
        let (filter, after, limit) = m.page_query();
        assert_eq!(filter.owner.as_deref(), Some("alice"));
        assert_eq!((after, limit), (Some((9, "t9")), 3));
        let read = Ok(Some((
            vec![task("t8", 8), task("t7", 7), task("t6", 6)],
            12,
        )));
        let page = m.handle_page(read).expect("read").expect("a page");
        assert_eq!(page.tasks.len(), 2);
        assert_eq!(page.total_size, 12);
        assert_eq!(page.next_page_token, encode_token(7, "t7"));
    }

    #[test]
    fn a_store_that_cannot_page_is_listed_whole_and_one_that_cannot_list_is_refused() {
        let mut m = ListMachine::new(&json!({"pageSize": 1}), Shape::V10, None).expect("ok");
        assert!(matches!(m.handle_page(Ok(None)), Ok(None)), "then all");
        let page = m
            .handle_all(Ok(Some(vec![task("a", 1), task("b", 2)])))
            .expect("a page");
        assert_eq!(page.tasks[0].id, "b", "newest first");
        assert_eq!((page.tasks.len(), page.total_size), (1, 2));
        let mut m = ListMachine::new(&json!({}), Shape::V10, None).expect("ok");
        assert!(matches!(m.handle_page(Ok(None)), Ok(None)), "then all");
        let Err(refused) = m.handle_all(Ok(None)) else {
            panic!("expected a refusal");
        };
        assert_eq!(refused.code, rpc::UNSUPPORTED_OPERATION);
    }

    #[test]
    fn a_failed_store_is_an_internal_error_and_bad_params_are_refused_first() {
        let mut m = ListMachine::new(&json!({}), Shape::V10, None).expect("ok");
        let Err(failed) = m.handle_page(Err(StoreError::new("down"))) else {
            panic!("expected a failure");
        };
        assert_eq!(failed.code, crate::wire::rpc::INTERNAL_ERROR);
        assert!(failed.message.contains("down"), "{}", failed.message);
        assert!(ListMachine::new(&json!({"pageSize": 0}), Shape::V10, None).is_err());
    }
}

#[cfg(test)]
mod order_tests {
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn newest_first_orders_by_time_then_id_descending() {
        let t = |id: &str, ms: Option<u64>| {
            let mut t =
                Task::from_value(&serde_json::json!({"id": id, "status": {"state": "working"}}))
                    .expect("task");
            t.updated_ms = ms;
            t
        };
        let mut seed: u64 = 7;
        for n in 0..40 {
            let mut tasks: Vec<Task> = (0..n)
                .map(|i| {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    t(
                        &format!("t{}", seed % 17),
                        Some((seed >> 40) % 5).filter(|_| i % 7 != 0),
                    )
                })
                .collect();
            let mut want = tasks.clone();
            want.sort_by_key(|t| std::cmp::Reverse((t.updated_ms.unwrap_or(0), t.id.clone())));
            newest_first(&mut tasks);
            let key = |v: &[Task]| {
                v.iter()
                    .map(|t| (t.updated_ms.unwrap_or(0), t.id.clone()))
                    .collect::<Vec<_>>()
            };
            assert_eq!(key(&tasks), key(&want), "{n} tasks");
        }
    }
}
