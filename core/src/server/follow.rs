//! Following tasks: SSE streams of new and resubscribed tasks, and
//! GetTask long-polls (`Prefer: wait`), woken locally or by store changes.

use super::*;

/// The seconds of an RFC 7240 `Prefer: wait=N` header, capped at [`MAX_WAIT_SECS`].
pub(super) fn preferred_wait(req: &HttpRequest) -> Option<u64> {
    let prefer = req.header("Prefer")?;
    // A plain loop, not an iterator chain (see ARCHITECTURE.md).
    for p in prefer.split([',', ';']) {
        if let Some(n) = p.trim().strip_prefix("wait=") {
            if let Some(n) = crate::wire::http::parse_u64(n.trim()) {
                return Some(n.min(MAX_WAIT_SECS));
            }
        }
    }
    None
}

impl<S: TaskStore, H: ServerHost, F: Fulfiller> A2aServer<S, H, F> {
    /// A streaming method: the stream, or the error to answer before it starts.
    pub(super) async fn stream_call(
        self: &Arc<Self>,
        io: &Io<H>,
        call: RpcRequest,
        owner: Owner<'_>,
        req: &HttpRequest,
    ) -> Result<Reply, RpcError> {
        let (first, slot) = match Method::from_name(&call.method) {
            Some(Method::Stream) => {
                match *self
                    .send(io, &call.params, call.shape, owner, req, true)
                    .await?
                {
                    send::Sent::Stream { first, slot } => (first, slot),
                    send::Sent::Task { .. } => {
                        return Err(RpcError::internal("the stream has no events".into()))
                    }
                }
            }
            _ => self.subscribe(io, &call.params, owner).await?,
        };
        let shape = answer_shape(&call, &first);
        // Not running here but not done: another replica runs it; follow
        // it through the store.
        #[cfg(feature = "replicas")]
        let remote = (slot.is_none() && !machine::ends_stream(first.state))
            .then(|| self.follow_stored(first.clone()));
        #[cfg(not(feature = "replicas"))]
        let remote = None;
        let hooks: Arc<dyn stream::Hooks> = self.clone();
        Ok(Reply::Stream {
            head: stream::stream_head(),
            body: stream::event_body(
                stream::Framing::of(&call),
                shape,
                first,
                slot,
                remote,
                hooks,
            ),
        })
    }

    /// Waits on `slot` (from [`Tasks::wait`]) through the exchange;
    /// dropping the future stops waiting.
    pub(super) async fn waited(&self, io: &Io<H>, slot: Slot) -> Waited {
        /// Frees the slot however the wait ends.
        struct Release<'a, S: TaskStore, H: ServerHost, F: Fulfiller> {
            server: &'a A2aServer<S, H, F>,
            slot: Slot,
        }
        impl<S: TaskStore, H: ServerHost, F: Fulfiller> Drop for Release<'_, S, H, F> {
            fn drop(&mut self) {
                self.server.tasks().drop_wait(self.slot);
            }
        }
        let _release = Release { server: self, slot };
        io.waited(slot).await
    }
}
