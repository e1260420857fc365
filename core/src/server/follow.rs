//! Following tasks: SSE streams of new and resubscribed tasks, and
//! GetTask long-polls (`Prefer: wait`), woken locally or by store changes.

use super::*;

/// The seconds of an RFC 7240 `Prefer: wait=N` header, capped at [`MAX_WAIT_SECS`].
pub(super) fn preferred_wait(req: &HttpRequest) -> Option<u64> {
    let prefer = req.header("Prefer")?;
    // A plain loop, not an iterator chain (see ARCHITECTURE.md).
    for p in prefer.split([',', ';']) {
        if let Some(n) = p.trim().strip_prefix("wait=") {
            if let Ok(n) = n.trim().parse::<u64>() {
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
        call: RpcRequest,
        owner: Owner<'_>,
        req: &HttpRequest,
    ) -> Result<Reply, RpcError> {
        let (first, slot) = match Method::from_name(&call.method) {
            Some(Method::Stream) => {
                let (task, request, _blocking, pending, span) = self
                    .create_task(&call.params, call.shape, owner, req)
                    .await?;
                let started = self
                    .start(request, task, Follow::Stream, pending, span)
                    .await?;
                started
                    .stream
                    .ok_or_else(|| RpcError::internal("the task ended at once".into()))?
            }
            _ => self.subscribe(&call.params, owner).await?,
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

    /// SubscribeToTask: the task as it is now and its later events. A task
    /// that has already ended cannot be followed (UnsupportedOperationError,
    /// as the A2A spec asks).
    pub(super) async fn subscribe(
        self: &Arc<Self>,
        params: &Value,
        owner: Owner<'_>,
    ) -> Result<(Task, Option<Slot>), RpcError> {
        let id = task_id(params)?;
        let live = {
            let mut tasks = self.tasks();
            // Another caller's running task is not found, before anything follows it.
            if tasks.task(id).is_some_and(|t| !visible(t, owner)) {
                return Err(task_not_found(id));
            }
            tasks.subscribe(id)
        };
        let (task, slot) = match live {
            Some(live) => live,
            // Not running here: the stored task, and nothing to follow.
            None => (self.existing(params, owner).await?, None),
        };
        if task.state.is_terminal() {
            if let Some(slot) = slot {
                self.tasks().drop_stream(slot);
            }
            return Err(RpcError::new(
                rpc::UNSUPPORTED_OPERATION,
                format!(
                    "Task {} is {}: a task in a terminal state cannot be subscribed to",
                    task.id,
                    task.state.as_str()
                ),
            ));
        }
        Ok((task, slot))
    }

    /// The events of a stored task running on another replica, from the
    /// version `last`: replayed from the store's event log
    /// ([`TaskStore::events_after`]) with `last`'s version as the cursor,
    /// then followed at each change the store tells of (or `store_poll`
    /// finds), until the task stops. The cursor moves past each event
    /// told, so none is told twice and none written after `last` is
    /// missed. A store that keeps no log is followed by comparing each
    /// version read with the one before it (chunks saved together merge).
    #[cfg(feature = "replicas")]
    pub(super) fn follow_stored(
        self: &Arc<Self>,
        last: Task,
    ) -> crate::host::transport::BoxStream<'static, StreamEvent> {
        let cursor = last.revision.version;
        let state = (
            self.clone(),
            last,
            cursor,
            std::collections::VecDeque::new(),
            false,
        );
        Box::pin(futures_util::stream::unfold(
            state,
            |(server, mut last, mut cursor, mut queue, mut done)| async move {
                loop {
                    if let Some(event) = queue.pop_front() {
                        return Some((event, (server, last, cursor, queue, done)));
                    }
                    if done {
                        return None;
                    }
                    // Watch before reading, so a change in between is not missed.
                    let changed = server.watched(&last.id);
                    match server.store.events_after(&last.id, cursor).await {
                        Ok(Some(events)) if !events.is_empty() => {
                            for (version, event) in events {
                                cursor = cursor.max(version);
                                done = event.state().is_some_and(machine::ends_stream);
                                queue.push_back(event);
                                if done {
                                    break;
                                }
                            }
                            continue;
                        }
                        // Nothing logged since: gone, or stopped by a
                        // write that logged nothing; else wait.
                        Ok(Some(_)) => match server.store.get(&last.id).await {
                            Ok(None) => return None,
                            Ok(Some(now))
                                if now.revision.version > cursor
                                    && machine::ends_stream(now.state) =>
                            {
                                queue.push_back(machine::status(
                                    &now,
                                    now.state,
                                    now.status_message.clone(),
                                    now.updated_ms,
                                ));
                                done = true;
                                continue;
                            }
                            _ => {}
                        },
                        // No log: compare versions.
                        Ok(None) => match server.store.get(&last.id).await {
                            Ok(Some(now)) if now.revision.version > last.revision.version => {
                                queue.extend(stream::changes(&last, &now));
                                done = machine::ends_stream(now.state);
                                last = now;
                                continue;
                            }
                            // Gone.
                            Ok(None) => return None,
                            // Unchanged, or unreadable for now: wait for the next change.
                            _ => {}
                        },
                        // Unreadable for now: wait for the next change.
                        Err(_) => {}
                    }
                    let poll = server.store_poll_ms.and_then(|ms| {
                        server
                            .host
                            .sleep_until(server.host.now_ms().saturating_add(ms))
                    });
                    match poll {
                        Some(poll) => {
                            futures_util::future::select(Box::pin(changed), poll).await;
                        }
                        None => changed.await,
                    }
                }
            },
        ))
    }

    /// Waits on `slot` (from [`Tasks::wait`]); dropping the future stops waiting.
    pub(super) fn waited(&self, slot: Slot) -> impl Future<Output = Waited> + '_ {
        struct Wait<'a, S: TaskStore, H: ServerHost, F: Fulfiller> {
            server: &'a A2aServer<S, H, F>,
            slot: Slot,
        }
        impl<S: TaskStore, H: ServerHost, F: Fulfiller> Future for Wait<'_, S, H, F> {
            type Output = Waited;
            fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Waited> {
                let slot = self.slot;
                self.server.tasks().poll(slot, cx, |t| t.poll_wait(slot))
            }
        }
        impl<S: TaskStore, H: ServerHost, F: Fulfiller> Drop for Wait<'_, S, H, F> {
            fn drop(&mut self) {
                self.server.tasks().drop_wait(self.slot);
            }
        }
        Wait { server: self, slot }
    }

    /// Ready once the stored task `id` changes ([`A2aServer::store_changed`]);
    /// dropping the future stops watching.
    #[cfg(feature = "replicas")]
    pub(super) fn watched(&self, id: &str) -> impl Future<Output = ()> + MaybeSend + '_ {
        struct Watching<'a, S: TaskStore, H: ServerHost, F: Fulfiller> {
            server: &'a A2aServer<S, H, F>,
            slot: Slot,
        }
        impl<S: TaskStore, H: ServerHost, F: Fulfiller> Future for Watching<'_, S, H, F> {
            type Output = ();
            fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
                let slot = self.slot;
                self.server.tasks().poll(slot, cx, |t| t.poll_watch(slot))
            }
        }
        impl<S: TaskStore, H: ServerHost, F: Fulfiller> Drop for Watching<'_, S, H, F> {
            fn drop(&mut self) {
                self.server.tasks().drop_watch(self.slot);
            }
        }
        let slot = self.tasks().watch(id);
        Watching { server: self, slot }
    }
}
