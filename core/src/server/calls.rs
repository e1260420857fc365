//! JSON-RPC calls: parsing the envelope, dispatching each method, and the
//! answers written straight to bytes.

use super::*;

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// Answers a JSON-RPC request already parsed (`parsed`).
    pub(super) async fn json_rpc_call(
        self: &Arc<Self>,
        io: &Io<H>,
        req: &HttpRequest,
        caller: Option<&Caller>,
        parsed: Result<RpcRequest, (Value, RpcError)>,
    ) -> Reply {
        let owner = caller.map(|c| c.owner.as_str());
        let mut waited = None;
        // The shape errors are written in: 1.0 adds `data` details.
        let mut shape = Shape::V03;
        let (id, outcome) = match parsed {
            Ok(call) if Method::from_name(&call.method).is_some_and(Method::streams) => {
                let id = call.id.clone();
                shape = call.shape;
                // Boxed, as every path but GetTask's below: a request's
                // future is as large as its largest path, and hosts move it
                // (a memcpy of all of it) before its first poll.
                match Box::pin(self.stream_call(io, call, owner, req)).await {
                    Ok(reply) => return reply,
                    Err(e) => (id, Err(e)),
                }
            }
            Ok(call) => {
                let id = call.id.clone();
                shape = call.shape;
                let is_get = Method::from_name(&call.method) == Some(Method::Get);
                // Hosts without a timer answer at once, as if no wait was asked.
                let outcome = match self.long_poll(req, is_get) {
                    Some((secs, at)) => {
                        waited = Some(secs);
                        Box::pin(self.get_task_waiting(io, &call, at, owner))
                            .await
                            .map(Answered::Task)
                    }
                    None => self.dispatch(io, call, caller, req).await,
                };
                (id, outcome)
            }
            Err((id, err)) => {
                // A client naming a version we lack speaks a later one: details help it.
                if err.code == rpc::VERSION_NOT_SUPPORTED {
                    shape = Shape::V10;
                }
                (id, Err(err))
            }
        };
        Reply::Full(rpc_answer(req, &id, &outcome, shape, waited))
    }

    pub(super) async fn dispatch(
        self: &Arc<Self>,
        io: &Io<H>,
        call: RpcRequest,
        caller: Option<&Caller>,
        req: &HttpRequest,
    ) -> Result<Answered, RpcError> {
        let shape = call.shape;
        let owner = caller.map(|c| c.owner.as_str());
        match Method::from_name(&call.method) {
            // Boxed: see json_rpc.
            Some(Method::Send) => {
                let sent = Box::pin(self.send(io, &call.params, shape, owner, req, false)).await?;
                let send::Sent::Task { task, history } = *sent else {
                    return Err(RpcError::internal("a SendMessage got a stream".into()));
                };
                // 1.0 wraps a SendMessage result: `{"task": …}`; 0.3 answers the bare task.
                Ok(Answered::Task(Answer {
                    wrap: shape == Shape::V10,
                    ..Answer::task(Arc::new(task), shape, history)
                }))
            }
            Some(Method::Get) => {
                let history = validate::history_length(&call.params, "historyLength")?;
                let task = self.existing(io, &call.params, owner).await?;
                let answer = Answer::about(&call, task, history);
                Ok(Answered::Task(answer))
            }
            Some(Method::Cancel) => {
                let mut answer = Box::pin(self.cancel(io, &call.params, shape, owner)).await?;
                answer.shape = answer_shape(&call, &answer.task);
                Ok(Answered::Task(answer))
            }
            Some(Method::List) => Box::pin(self.list(io, &call.params, shape, owner))
                .await
                .map(Answered::Page),
            #[cfg(feature = "push")]
            Some(Method::PushConfig) if self.push.is_some() => {
                Box::pin(self.push_config(io, &call, owner))
                    .await
                    .map(|v| Answered::Value(Box::new(v)))
            }
            // The card says pushNotifications: false.
            Some(Method::PushConfig) => Err(push_not_supported()),
            Some(Method::ExtendedCard) => self
                .extended_card(caller, req, shape)
                .map(|v| Answered::Value(Box::new(v))),
            // Streaming methods are answered before dispatch.
            Some(Method::Stream | Method::Subscribe) | None => Err(RpcError::new(
                rpc::METHOD_NOT_FOUND,
                format!("Method not found: {}", call.method),
            )),
        }
    }

    /// GetExtendedAgentCard. With auth on, the caller is authenticated (the
    /// step before any call) and gets the card, which then declares
    /// `extendedAgentCard`: the same card as the public one (nothing varies
    /// by caller or scope yet). Without auth the card declares none: -32004,
    /// not -32007 (that one is for a declared card not configured).
    /// The card is written in the call's version, as the public one is for
    /// the version a card request asks.
    pub(super) fn extended_card(
        &self,
        caller: Option<&Caller>,
        req: &HttpRequest,
        shape: Shape,
    ) -> Result<Value, RpcError> {
        match (caller, &self.card) {
            (Some(_), Some(card)) => {
                let (body, _) = card.body(req, shape);
                serde_json::from_slice(&body)
                    .map_err(|_| RpcError::internal("the card is not JSON".into()))
            }
            _ => Err(RpcError::new(
                rpc::UNSUPPORTED_OPERATION,
                "This agent has no extended agent card",
            )),
        }
    }

    /// ListTasks: one page of the stored tasks the params ask for; the
    /// driver of a [`list::ListMachine`].
    pub(super) async fn list(
        &self,
        io: &Io<H>,
        params: &Value,
        shape: Shape,
        owner: Owner<'_>,
    ) -> Result<list::Page, RpcError> {
        let mut list = list::ListMachine::new(params, shape, owner)?;
        let (filter, after, limit) = list.page_query();
        let after = after.map(|(ms, id)| (ms, id.to_string()));
        let read = io.list_page(filter.clone(), after, limit).await;
        if let Some(page) = list.handle_page(read)? {
            return Ok(page);
        }
        let read = io.list(list.filter().clone()).await;
        list.handle_all(read)
    }
}

/// The HTTP answer to JSON-RPC call `id`: its result or error in an
/// envelope (the error's details in `shape`), in the media type the
/// request was sent in; `waited`: the `Prefer: wait` honoured.
pub(super) fn rpc_answer(
    req: &HttpRequest,
    id: &Value,
    outcome: &Result<Answered, RpcError>,
    shape: Shape,
    waited: Option<u64>,
) -> HttpResponse {
    let body = match outcome {
        Ok(result) => serde_json::to_vec(&Envelope {
            jsonrpc: "2.0",
            id,
            result: Some(result),
            error: None,
        }),
        Err(e) => serde_json::to_vec(&Envelope {
            jsonrpc: "2.0",
            id,
            result: None,
            error: Some(ErrorBody {
                code: e.code,
                message: &e.message,
                data: (shape == Shape::V10).then(|| e.details()),
            }),
        }),
    };
    // Serialising plain data into memory cannot fail; keep a valid answer anyway.
    let body = body.unwrap_or_else(|_| {
        br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"internal error"}}"#
            .to_vec()
    });
    let mut resp = HttpResponse::json(200, body);
    // A client that sends the A2A media type (1.0.1) gets it back;
    // `application/json` to the others.
    if req
        .header("Content-Type")
        .is_some_and(|t| t.trim_start().starts_with(rest::A2A_JSON))
    {
        resp.headers = vec![("Content-Type".into(), rest::A2A_JSON.into())];
    }
    if let Some(secs) = waited {
        resp.headers
            .push(("Preference-Applied".into(), format!("wait={secs}")));
    }
    resp
}

/// `params.id`, the task a call names.
pub(super) fn task_id(params: &Value) -> Result<&str, RpcError> {
    params
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("params.id must be a string"))
}

/// The shape to answer a call about `task` in: the version the call
/// names, else the one the task was made in (a 1.0 client that omits
/// `A2A-Version` reads its own tasks in 1.0 shapes).
pub(super) fn answer_shape(call: &RpcRequest, task: &Task) -> Shape {
    if call.versioned {
        call.shape
    } else {
        task.dialect
    }
}

/// A JSON-RPC result (always a task here), serialised straight to bytes.
pub(super) struct Answer {
    /// Shared with the store when it is GetTask's, read from a memory store.
    pub(super) task: Arc<Task>,
    pub(super) shape: Shape,
    pub(super) history_length: Option<usize>,
    /// 1.0 SendMessage results are `{"task": …}`.
    pub(super) wrap: bool,
}

impl Answer {
    /// `task` answering `call`, in the shape [`answer_shape`] picks.
    pub(super) fn about(
        call: &RpcRequest,
        task: Arc<Task>,
        history_length: Option<usize>,
    ) -> Answer {
        let shape = answer_shape(call, &task);
        Answer::task(task, shape, history_length)
    }

    pub(super) fn task(task: Arc<Task>, shape: Shape, history_length: Option<usize>) -> Answer {
        Answer {
            task,
            shape,
            history_length,
            wrap: false,
        }
    }
}

/// A JSON-RPC result: a task, a page of them, or another value.
// One per answer, never stored: boxing the task would cost GetTask an allocation.
#[allow(clippy::large_enum_variant)]
pub(super) enum Answered {
    Task(Answer),
    Page(list::Page),
    #[cfg_attr(not(feature = "push"), allow(dead_code))]
    Value(Box<Value>),
}

impl serde::Serialize for Answered {
    fn serialize<Ser: serde::Serializer>(&self, s: Ser) -> Result<Ser::Ok, Ser::Error> {
        match self {
            Answered::Task(a) => a.serialize(s),
            Answered::Page(p) => p.serialize(s),
            Answered::Value(v) => v.serialize(s),
        }
    }
}

impl serde::Serialize for Answer {
    fn serialize<Ser: serde::Serializer>(&self, s: Ser) -> Result<Ser::Ok, Ser::Error> {
        use serde::ser::SerializeMap;
        let shaped = self.task.shaped(self.shape, self.history_length);
        if self.wrap {
            let mut map = s.serialize_map(Some(1))?;
            map.serialize_entry("task", &shaped)?;
            map.end()
        } else {
            serde::Serialize::serialize(&shaped, s)
        }
    }
}

#[derive(serde::Serialize)]
pub(super) struct ErrorBody<'a> {
    pub(super) code: i64,
    pub(super) message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) data: Option<rpc::ErrorDetails<'a>>,
}

#[derive(serde::Serialize)]
pub(super) struct Envelope<'a> {
    pub(super) jsonrpc: &'static str,
    pub(super) id: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) result: Option<&'a Answered>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) error: Option<ErrorBody<'a>>,
}
