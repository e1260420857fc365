//! A task's push deliveries as a machine of the client's shape
//! ([`Machine`]): it takes the task's saved states one by one, reads the
//! task's webhooks for each, and posts the state to each webhook until a
//! 2xx answer, each attempt bounded by [`DELIVERY_TIMEOUT_MS`] and retried
//! after each pause of [`RETRY_BACKOFF_MS`]. No store, host or future in
//! it: [`A2aServer::notify`]'s job drives it, sending its requests and
//! arming its timers with the server's host, and doing its work (the next
//! queued state, the store's configs). A driver of its own, not the
//! client's generic one: that one's instance for the server's host cost
//! the npm `.wasm` 1.3 KB.

use super::push::{configs_of, PushConfig, DELIVERY_TIMEOUT_MS, RETRY_BACKOFF_MS};
use super::{A2aServer, Fulfiller, ServerHost, StoreError, TaskStore};
use crate::error::TransportError;
use crate::host::driver::{Machine, ResponseHead, Step};
use crate::host::lock::Lock;
use crate::model::task::Task;
use crate::wire::http::{HttpRequest, HttpResponse};
use serde_json::Value;
use std::sync::Arc;

/// A saved state of a task, with when it was saved (Unix ms, when known).
pub(crate) type Saved = (Task, Option<u64>);

/// What the delivery machine asks the server for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PushWork {
    /// The task's next saved state not yet delivered
    /// ([`super::push::PushConfigs::next`]).
    Next,
    /// The task's webhooks as the store has them now.
    Configs,
}

/// What that work gave.
// One at a time, moved once into the machine: boxing would cost an allocation per state.
#[allow(clippy::large_enum_variant)]
pub(crate) enum PushWorked {
    Next(Option<Saved>),
    Configs(Result<Option<Value>, StoreError>),
}

/// Where the machine is in the delivery of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    /// The request is out; its answer (or its deadline) is awaited.
    Sending,
    /// A failed attempt's pause before the next.
    Pausing,
}

/// The deliveries of one task's saved states, in order.
pub(crate) struct PushDelivery {
    task_id: String,
    /// The state being delivered, and when it was saved.
    state: Option<Task>,
    saved_ms: Option<u64>,
    /// Its webhooks still to be sent it, the next last.
    configs: Vec<PushConfig>,
    /// The request to the current webhook, its url, and the attempt (0 the first).
    request: Option<HttpRequest>,
    url: String,
    attempt: usize,
    phase: Attempt,
    /// Why the last attempt failed.
    last: String,
    /// A problem for the host's report (at most one per step).
    report: Option<String>,
}

impl PushDelivery {
    pub(crate) fn new(task_id: String) -> PushDelivery {
        PushDelivery {
            task_id,
            state: None,
            saved_ms: None,
            configs: Vec::new(),
            request: None,
            url: String::new(),
            attempt: 0,
            phase: Attempt::Sending,
            last: String::new(),
            report: None,
        }
    }

    /// The current request again, due by the attempt's deadline.
    fn send(&mut self, now_ms: u64) -> Step<(), PushWork> {
        self.phase = Attempt::Sending;
        match &self.request {
            Some(request) => Step::Send {
                request: request.clone(),
                deadline_ms: now_ms.saturating_add(DELIVERY_TIMEOUT_MS),
            },
            None => self.next_webhook(now_ms),
        }
    }

    /// The current state to the next webhook, or the next state.
    fn next_webhook(&mut self, now_ms: u64) -> Step<(), PushWork> {
        let (Some(config), Some(task)) = (self.configs.pop(), &self.state) else {
            self.request = None;
            return Step::Work(PushWork::Next);
        };
        self.request = Some(config.request(task));
        self.url = config.url;
        self.attempt = 0;
        self.send(now_ms)
    }

    /// The attempt failed (`why`): pause and try again, or give up on this webhook.
    fn failed(&mut self, now_ms: u64, why: String) -> Step<(), PushWork> {
        self.last = why;
        self.attempt += 1;
        match RETRY_BACKOFF_MS.get(self.attempt - 1) {
            Some(pause) => {
                self.phase = Attempt::Pausing;
                Step::Sleep {
                    until_ms: now_ms.saturating_add(*pause),
                }
            }
            None => {
                self.report = Some(format!(
                    "push notification for task {} to {} failed: {}",
                    self.task_id, self.url, self.last
                ));
                self.next_webhook(now_ms)
            }
        }
    }
}

impl Machine for PushDelivery {
    type Output = ();
    /// A problem for the host's report ([`ServerHost::report`]).
    type Event = String;
    type Work = PushWork;
    type Worked = PushWorked;

    fn start(&mut self, _now_ms: u64) -> Step<(), PushWork> {
        Step::Work(PushWork::Next)
    }

    fn handle_work(&mut self, now_ms: u64, worked: PushWorked) -> Step<(), PushWork> {
        match worked {
            PushWorked::Next(None) => Step::Done(()),
            PushWorked::Next(Some((task, saved_ms))) => {
                self.state = Some(task);
                self.saved_ms = saved_ms;
                Step::Work(PushWork::Configs)
            }
            PushWorked::Configs(Err(e)) => {
                self.report = Some(format!(
                    "push notifications for task {}: the task store failed: {e}",
                    self.task_id
                ));
                self.state = None;
                Step::Work(PushWork::Next)
            }
            PushWorked::Configs(Ok(stored)) => {
                // Read for each state: a webhook deleted meanwhile (on any
                // replica) gets no more; one set after the state was saved
                // gets only later ones.
                self.configs.clear();
                for (config, created) in configs_of(stored, &self.task_id) {
                    if created.is_none_or(|c| self.saved_ms.is_none_or(|saved| c <= saved)) {
                        self.configs.push(config);
                    }
                }
                self.configs.reverse();
                self.next_webhook(now_ms)
            }
        }
    }

    fn handle_response(
        &mut self,
        now_ms: u64,
        response: Result<HttpResponse, TransportError>,
    ) -> Step<(), PushWork> {
        match response {
            Ok(resp) if (200..300).contains(&resp.status) => self.next_webhook(now_ms),
            Ok(resp) => self.failed(now_ms, format!("HTTP {}", resp.status)),
            Err(e) => self.failed(now_ms, e.to_string()),
        }
    }

    fn handle_timeout(&mut self, now_ms: u64) -> Step<(), PushWork> {
        match self.phase {
            Attempt::Pausing => self.send(now_ms),
            Attempt::Sending => {
                self.failed(now_ms, format!("no answer within {DELIVERY_TIMEOUT_MS} ms"))
            }
        }
    }

    /// Never asked for: the machine sends whole requests only.
    fn handle_head(
        &mut self,
        now_ms: u64,
        _head: Result<ResponseHead, TransportError>,
    ) -> Step<(), PushWork> {
        self.failed(now_ms, "a streamed answer".into())
    }

    fn handle_body(
        &mut self,
        now_ms: u64,
        _chunk: Result<Option<Vec<u8>>, TransportError>,
    ) -> Step<(), PushWork> {
        self.failed(now_ms, "a streamed answer".into())
    }

    fn handle_abort(&mut self, _now_ms: u64) -> Step<(), PushWork> {
        Step::Done(())
    }

    fn poll_event(&mut self) -> Option<String> {
        self.report.take()
    }
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// Sends the saved `task` to each of its webhooks (as the store has
    /// them when it is sent), in the background: one delivery job per task,
    /// so each webhook gets the states in order.
    pub(super) fn notify(self: &Arc<Self>, task: &Task) {
        let Some((_, queues)) = &self.push else {
            return;
        };
        let start = queues.lock().enqueue(task, self.host.unix_ms());
        if !start {
            return;
        }
        let server = self.clone();
        let task_id = task.id.clone();
        self.tasks().start_work(Box::pin(async move {
            use futures_util::future::{select, Either};
            let host = &server.host;
            let mut machine = PushDelivery::new(task_id.clone());
            let mut step = machine.start(host.now_ms());
            loop {
                while let Some(problem) = machine.poll_event() {
                    host.report(&problem);
                }
                // A request and its deadline, or a pause (nothing sent) and its end.
                let (sent, until_ms, pause) = match step {
                    Step::Work(PushWork::Next) => {
                        let next = server
                            .push
                            .as_ref()
                            .and_then(|(_, q)| q.lock().next(&task_id));
                        step = machine.handle_work(host.now_ms(), PushWorked::Next(next));
                        continue;
                    }
                    Step::Work(PushWork::Configs) => {
                        let stored = server.store.get_push_configs(&task_id).await;
                        step = machine.handle_work(host.now_ms(), PushWorked::Configs(stored));
                        continue;
                    }
                    Step::Send {
                        request,
                        deadline_ms,
                    } => (
                        host.send(request).unwrap_or_else(|| {
                            Box::pin(std::future::ready(Err(TransportError::new(
                                "this host cannot send",
                            ))))
                        }),
                        deadline_ms,
                        false,
                    ),
                    Step::Sleep { until_ms } => {
                        (Box::pin(std::future::pending()) as _, until_ms, true)
                    }
                    // The machine sends whole requests only.
                    Step::Stream { .. } | Step::Read { .. } | Step::Done(()) => return,
                };
                // Without a host timer, an attempt has no deadline and a pause
                // ends at once.
                let timer = host.sleep_until(until_ms).unwrap_or_else(|| match pause {
                    true => Box::pin(std::future::ready(())),
                    false => Box::pin(std::future::pending()),
                });
                step = match select(sent, timer).await {
                    Either::Left((answer, _)) => machine.handle_response(host.now_ms(), answer),
                    Either::Right(_) => machine.handle_timeout(host.now_ms()),
                };
            }
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn task() -> Task {
        Task::from_value(&json!({"id": "t1", "contextId": "c1",
            "status": {"state": "completed"}}))
        .expect("task")
    }

    /// Two webhooks of task `t1` as a store keeps them, set at 50 and 500.
    fn stored() -> Option<Value> {
        Some(json!([
            {"id": "a", "url": "https://a.example/hook", "dialect": "1.0", "createdMs": 50},
            {"id": "b", "url": "https://b.example/hook", "dialect": "1.0", "createdMs": 500}
        ]))
    }

    fn answer(status: u16) -> Result<HttpResponse, TransportError> {
        Ok(HttpResponse {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        })
    }

    /// The url a `Send` step posts to, and its deadline.
    fn sent(step: Step<(), PushWork>) -> (String, u64) {
        match step {
            Step::Send {
                request,
                deadline_ms,
            } => (request.url, deadline_ms),
            other => panic!("expected a send, got {other:?}"),
        }
    }

    #[test]
    fn a_failing_webhook_is_retried_after_each_pause_then_delivered() {
        let mut m = PushDelivery::new("t1".into());
        assert!(matches!(m.start(0), Step::Work(PushWork::Next)));
        let step = m.handle_work(10, PushWorked::Next(Some((task(), Some(100)))));
        assert!(matches!(step, Step::Work(PushWork::Configs)));
        // Webhook b was set after the state was saved: it gets none of it.
        let step = m.handle_work(20, PushWorked::Configs(Ok(stored())));
        assert_eq!(sent(step), ("https://a.example/hook".into(), 10_020));
        let step = m.handle_response(30, answer(503));
        assert!(matches!(step, Step::Sleep { until_ms: 530 }), "{step:?}");
        assert_eq!(
            sent(m.handle_timeout(530)),
            ("https://a.example/hook".into(), 10_530)
        );
        let step = m.handle_response(540, Err(TransportError::new("refused")));
        assert!(matches!(step, Step::Sleep { until_ms: 2_540 }), "{step:?}");
        assert_eq!(sent(m.handle_timeout(2_540)).1, 12_540);
        let step = m.handle_response(2_550, answer(204));
        assert!(matches!(step, Step::Work(PushWork::Next)), "{step:?}");
        assert!(matches!(
            m.handle_work(2_560, PushWorked::Next(None)),
            Step::Done(())
        ));
        assert_eq!(m.poll_event(), None, "delivered: nothing to report");
    }

    #[test]
    fn a_store_failure_skips_the_state_and_is_reported() {
        let mut m = PushDelivery::new("t1".into());
        let _ = m.start(0);
        let _ = m.handle_work(0, PushWorked::Next(Some((task(), None))));
        let step = m.handle_work(0, PushWorked::Configs(Err(StoreError::new("down"))));
        assert!(matches!(step, Step::Work(PushWork::Next)));
        let report = m.poll_event().expect("a report");
        assert!(
            report.contains("task t1") && report.contains("down"),
            "{report}"
        );
        // A state with no webhook: straight to the next.
        let _ = m.handle_work(0, PushWorked::Next(Some((task(), None))));
        let step = m.handle_work(0, PushWorked::Configs(Ok(None)));
        assert!(matches!(step, Step::Work(PushWork::Next)));
    }
}
