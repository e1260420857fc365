"""Official a2a-sdk (Python) A2A client for interop tests.

Usage:  .venv/bin/python py_client.py CARD_URL TEXT [--legacy|--v03] [--non-blocking|--stream]
                                      [--rest] [--cancel]
                                      [--answer ANSWER] [--list] [--push URL]
                                      [--api-key-env NAME | --bearer-env NAME]

  CARD_URL   full URL of the agent card, e.g.
             http://127.0.0.1:P/.well-known/agent-card.json
  --legacy / --v03
             use the SDK's v0.3 compatible JSON-RPC transport
             (a2a.compat.v0_3 CompatJsonRpcTransport) instead of the 1.0 one.
  --non-blocking
             send with configuration.returnImmediately=true (0.3: blocking=false)
             and rely on GetTask polling.
  --rest     use the SDK's HTTP+JSON (REST) transport (ClientConfig.supported_protocol_bindings
             = ['HTTP+JSON']): the card must list an HTTP+JSON interface. With --legacy, its
             v0.3 REST transport (the /v1 routes).
  --cancel   then CancelTask the finished task and add "cancel": the SDK error class name
             (a finished task is not cancelable: TaskNotCancelableError).

Fetches the card with the SDK (ClientFactory.create_from_url), sends one
blocking, non-streaming message, polls GetTask (<= 10 s) while the returned
task is not in a final state, then prints one JSON line
  {"state": "...", "text": "..."}
state: completed | failed | canceled | rejected | input-required |
       auth-required | submitted | working | unknown | message
       ("message" = the agent answered with a Message instead of a Task).
text:  artifact text parts joined with "\n", else the text of the last agent
       message (task history), else the status message text.
Exit: 0 completed (or a Message reply), 2 other final state, 1 error/timeout.

--stream (not with --non-blocking)
  Uses the SDK client's streaming path instead: ClientConfig(streaming=True),
  so Client.send_message() sends SendStreamingMessage (1.0) or, with --legacy,
  message/stream (0.3) and yields every SSE event (a2a-sdk 1.3.0 BaseClient
  streams only when ClientConfig.streaming AND card.capabilities.streaming are
  true; otherwise it silently does a blocking SendMessage, and this client then
  warns on stderr and records a single `task` event). The events are folded
  into a task locally (status replaced, artifact chunks appended by artifactId,
  as the servers do). The stream is bounded to 30 s in total. If it ends while
  the task is not final, GetTask polling follows as in the default mode (the
  `events` list still shows only what the stream delivered). Output is the same
  single JSON line with one more key, `events`, in arrival order:
    {"state": "completed", "text": "echo: sleep 1000", "events": [
      {"kind": "task", "state": "submitted", "t_ms": 4.1, "taskId": "…", "timestamp": null},
      {"kind": "status-update", "state": "working", "t_ms": 5.0, "taskId": "…", "timestamp": "2026-…Z"},
      {"kind": "artifact-update", "state": null, "t_ms": 1006.2, "taskId": "…",
       "artifactId": "…", "append": false, "lastChunk": true, "text": "echo: sleep 1000"},
      {"kind": "status-update", "state": "completed", "t_ms": 1006.9, "taskId": "…", "timestamp": "2026-…Z"}]}
  kind: task | status-update | artifact-update | message. state: as above for
  task / status-update, null for artifact-update and message. t_ms: ms since
  the send started (1 decimal). timestamp: the status timestamp (RFC 3339
  string, as the SDK re-serialises it) or null. status-update with a status
  message and message events also carry "text"; artifact-update carries
  artifactId / append / lastChunk / text (its text parts joined with "\n").

--drop-after N [--resubscribe CARD_URL_B]   (with --stream)
  Reads the first N events of the stream, drops the connection (closes the
  SDK's stream), then calls the SDK's Client.subscribe (SubscribeToTask) for
  the task at CARD_URL_B (another replica; default CARD_URL) and records its
  events too, after a {"kind": "dropped", "t_ms": …} marker. The subscription
  starts with the task as stored (a `task` event), then the events after it.

--answer ANSWER
  When the task stops in input-required or auth-required, answer it: one more
  message with ANSWER that names the task (task_id) and its context_id, sent and
  followed the same way. The output then describes the task after the answer,
  with two more keys: "asked" (the question: the status message text the task
  stopped with) and "sameTask" (whether the answer continued the same task id).

--api-key-env NAME / --bearer-env NAME
  Authenticate with the SDK's own plumbing: an AuthInterceptor
  (a2a.client.auth) whose CredentialService answers, for each scheme the card
  declares (securitySchemes / securityRequirements), with the value of the
  environment variable NAME when the scheme is of that kind: --api-key-env for
  apiKey schemes, --bearer-env for http bearer, oauth2 and openIdConnect
  schemes. The interceptor places it (an apiKey in the header the scheme names;
  SDK 1.3.0 skips query and cookie keys; a bearer as Authorization). The card
  itself is fetched without credentials (it is public). On an HTTP error the
  stderr line carries the SDK's message, "HTTP Error 401: ..." for a refusal.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid

import httpx

from a2a.client import ClientCallContext, ClientConfig, ClientFactory
from a2a.client.auth import AuthInterceptor, CredentialService
from a2a.client.card_resolver import A2ACardResolver
from a2a.compat.v0_3.versions import is_legacy_version
from a2a.types import (
    AgentCard,
    AgentInterface,
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)


POLL_BUDGET_S = 10.0
POLL_INTERVAL_S = 0.2
CALL_TIMEOUT_S = 30.0

FINAL_STATES = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
    TaskState.TASK_STATE_INPUT_REQUIRED,
    TaskState.TASK_STATE_AUTH_REQUIRED,
}


class LegacyClientFactory(ClientFactory):
    """ClientFactory that always selects the SDK's v0.3 JSON-RPC transport.

    The stock factory picks the v0.3 transport only when the chosen card
    interface has a protocolVersion in [0.3, 1.0) and prefers 1.0 when both
    are advertised. Here we keep only legacy interfaces; if the card has none,
    its JSONRPC interfaces are re-stamped as 0.3.
    """

    binding = 'JSONRPC'

    def create(self, card: AgentCard, interceptors=None):  # type: ignore[override]
        binding = self.binding
        legacy = [
            i
            for i in card.supported_interfaces
            if i.protocol_binding == binding
            and is_legacy_version(i.protocol_version)
        ]
        if not legacy:
            legacy = [
                AgentInterface(
                    url=i.url,
                    protocol_binding=binding,
                    protocol_version='0.3',
                    tenant=i.tenant,
                )
                for i in card.supported_interfaces
                if i.protocol_binding == binding
            ]
        forced = AgentCard()
        forced.CopyFrom(card)
        del forced.supported_interfaces[:]
        forced.supported_interfaces.extend(legacy)
        return super().create(forced, interceptors)


class EnvCredentials(CredentialService):
    """A credential for the card's schemes of one kind, from an env variable."""

    BEARER_KINDS = ('http_auth_security_scheme', 'oauth2_security_scheme',
                    'open_id_connect_security_scheme')

    def __init__(self, card: AgentCard, api_key_env: str | None, bearer_env: str | None):
        self._schemes = card.security_schemes
        self._api_key = os.environ.get(api_key_env, '') if api_key_env else ''
        self._bearer = os.environ.get(bearer_env, '') if bearer_env else ''

    async def get_credentials(self, security_scheme_name, context):
        scheme = self._schemes.get(security_scheme_name)
        if scheme is None:
            return None
        kind = scheme.WhichOneof('scheme')
        if kind == 'api_key_security_scheme':
            return self._api_key or None
        if kind in self.BEARER_KINDS:
            return self._bearer or None
        return None


async def fetch_card(card_url: str) -> AgentCard:
    """The public card, fetched as ClientFactory.create_from_url does."""
    async with httpx.AsyncClient(headers={'A2A-Version': '1.0'}) as http:
        return await A2ACardResolver(http, card_url).get_agent_card(relative_card_path='/')


def status_timestamp(status) -> str | None:
    return status.timestamp.ToJsonString() if status.HasField('timestamp') else None


def event_record(event, t_ms: float) -> dict:
    """One machine-readable line item for a StreamResponse (--stream)."""
    t_ms = round(t_ms, 1)
    kind = event.WhichOneof('payload')
    if kind == 'task':
        return {'kind': 'task', 'state': state_name(event.task.status.state), 't_ms': t_ms,
                'taskId': event.task.id, 'timestamp': status_timestamp(event.task.status)}
    if kind == 'status_update':
        ev = event.status_update
        rec = {'kind': 'status-update', 'state': state_name(ev.status.state), 't_ms': t_ms,
               'taskId': ev.task_id, 'timestamp': status_timestamp(ev.status)}
        if ev.status.HasField('message'):
            rec['text'] = '\n'.join(parts_text(ev.status.message.parts))
        return rec
    if kind == 'artifact_update':
        ev = event.artifact_update
        return {'kind': 'artifact-update', 'state': None, 't_ms': t_ms, 'taskId': ev.task_id,
                'artifactId': ev.artifact.artifact_id, 'append': ev.append,
                'lastChunk': ev.last_chunk, 'text': '\n'.join(parts_text(ev.artifact.parts))}
    if kind == 'message':
        return {'kind': 'message', 'state': None, 't_ms': t_ms,
                'text': '\n'.join(parts_text(event.message.parts))}
    return {'kind': str(kind), 'state': None, 't_ms': t_ms}


def fold_event(task: Task | None, event) -> Task | None:
    """Applies one stream event to the locally aggregated task."""
    kind = event.WhichOneof('payload')
    if kind == 'task':
        folded = Task()
        folded.CopyFrom(event.task)
        return folded
    if kind not in ('status_update', 'artifact_update'):
        return task
    ev = getattr(event, kind)
    if task is None:
        task = Task(id=ev.task_id, context_id=ev.context_id)
    if kind == 'status_update':
        task.status.CopyFrom(ev.status)
        return task
    for artifact in task.artifacts:
        if artifact.artifact_id == ev.artifact.artifact_id:
            if ev.append:
                artifact.parts.extend(ev.artifact.parts)
            else:
                artifact.CopyFrom(ev.artifact)
            return task
    task.artifacts.append(ev.artifact)
    return task


def state_name(state: int) -> str:
    name = TaskState.Name(state)
    if name == 'TASK_STATE_UNSPECIFIED':
        return 'unknown'
    return name.removeprefix('TASK_STATE_').lower().replace('_', '-')


def parts_text(parts) -> list[str]:
    return [p.text for p in parts if p.WhichOneof('content') == 'text']


def task_text(task: Task) -> str:
    texts: list[str] = []
    for artifact in task.artifacts:
        texts.extend(parts_text(artifact.parts))
    if texts:
        return '\n'.join(texts)
    for msg in reversed(task.history):
        if msg.role == Role.ROLE_AGENT:
            t = parts_text(msg.parts)
            if t:
                return '\n'.join(t)
    if task.status.HasField('message'):
        return '\n'.join(parts_text(task.status.message.parts))
    return ''


class Answered(Exception):
    """The agent answered with a Message (already printed)."""


async def run(card_url: str, text: str, legacy: bool, non_blocking: bool,
              stream: bool = False, answer: str | None = None,
              list_after: bool = False, push_url: str | None = None,
              rest: bool = False, cancel: bool = False,
              api_key_env: str | None = None, bearer_env: str | None = None,
              drop_after: int | None = None, resubscribe: str | None = None) -> int:
    factory_cls = LegacyClientFactory if legacy else ClientFactory
    bindings = ['HTTP+JSON'] if rest else []
    if legacy:
        LegacyClientFactory.binding = 'HTTP+JSON' if rest else 'JSONRPC'
    # streaming=False: use SendMessage / message/send (blocking), not SSE.
    # --stream: streaming=True, SendStreamingMessage / message/stream (SSE).
    # $TRACEPARENT: every request of the SDK client carries it, as a traced
    # application's would (W3C trace context; the SDK has no propagation).
    traced = ({'httpx_client': httpx.AsyncClient(headers={'traceparent': os.environ['TRACEPARENT']})}
              if os.environ.get('TRACEPARENT') else {})
    factory = factory_cls(ClientConfig(streaming=stream,
                                       supported_protocol_bindings=bindings, **traced))
    if api_key_env or bearer_env:
        # The SDK's own auth plumbing: an interceptor over a credential service.
        card = await fetch_card(card_url)
        client = factory.create(
            card, interceptors=[AuthInterceptor(EnvCredentials(card, api_key_env, bearer_env))])
    else:
        # relative_card_path='/' means "fetch CARD_URL as given".
        client = await factory.create_from_url(card_url, relative_card_path='/')
    ctx = ClientCallContext(timeout=CALL_TIMEOUT_S)
    events: list[dict] | None = [] if stream else None

    asked: dict = {}

    def emit(state: str, result_text: str) -> None:
        out = {'state': state, 'text': result_text}
        if events is not None:
            out['events'] = events
        out.update(asked)
        print(json.dumps(out))

    if stream:
        card = getattr(client, '_card', None)
        if card is not None and not card.capabilities.streaming:
            print('warning: card says capabilities.streaming=false; the SDK '
                  'falls back to a blocking SendMessage', file=sys.stderr)

    async def turn(text: str, task_id: str = '', context_id: str = '') -> Task:
        """One message (in the task and context named, if any), followed until
        the task settles. Raises Answered when the agent answers with a Message."""
        request = SendMessageRequest(
            message=Message(
                role=Role.ROLE_USER,
                message_id=str(uuid.uuid4()),
                parts=[Part(text=text)],
                task_id=task_id,
                context_id=context_id,
            )
        )
        if non_blocking:
            request.configuration.return_immediately = True
        if push_url:
            # The webhook rides on the message; the task's states are POSTed to it.
            request.configuration.task_push_notification_config.CopyFrom(
                TaskPushNotificationConfig(
                    url=push_url, token='py-token',
                    authentication=AuthenticationInfo(scheme='Bearer',
                                                      credentials='py-secret')))
        task: Task | None = None
        reply: Message | None = None
        if events is None:
            async for event in client.send_message(request, context=ctx):
                if event.HasField('task'):
                    task = event.task
                elif event.HasField('message'):
                    reply = event.message
        else:
            t0 = time.perf_counter()
            async with asyncio.timeout(CALL_TIMEOUT_S):
                stream_a = client.send_message(request, context=ctx)
                async for event in stream_a:
                    events.append(event_record(event, (time.perf_counter() - t0) * 1000))
                    if event.HasField('message'):
                        reply = event.message
                    else:
                        task = fold_event(task, event)
                    if drop_after is not None and len(events) >= drop_after:
                        break
                if drop_after is not None and task is not None:
                    # Drop the connection, then SubscribeToTask elsewhere.
                    await stream_a.aclose()
                    events.append({'kind': 'dropped', 't_ms': round((time.perf_counter() - t0) * 1000, 1)})
                    other = await factory.create_from_url(resubscribe or card_url,
                                                          relative_card_path='/')
                    try:
                        async for event in other.subscribe(SubscribeToTaskRequest(id=task.id),
                                                           context=ctx):
                            events.append(event_record(event, (time.perf_counter() - t0) * 1000))
                            task = fold_event(task, event)
                    finally:
                        await other.close()
        if task is None:
            if reply is None:
                raise RuntimeError('server returned neither a task nor a message')
            emit('message', '\n'.join(parts_text(reply.parts)))
            raise Answered()

        deadline = time.monotonic() + POLL_BUDGET_S
        while task.status.state not in FINAL_STATES:
            if time.monotonic() >= deadline:
                emit(state_name(task.status.state), task_text(task))
                raise RuntimeError(f'task {task.id} still {state_name(task.status.state)} '
                                   f'after {POLL_BUDGET_S:.0f}s of polling')
            await asyncio.sleep(POLL_INTERVAL_S)
            task = await client.get_task(GetTaskRequest(id=task.id), context=ctx)
        return task

    waiting = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
    try:
        try:
            task = await turn(text)
            if answer is not None and task.status.state in waiting:
                question = '\n'.join(parts_text(task.status.message.parts))
                first = task.id
                task = await turn(answer, task.id, task.context_id)
                asked.update({'asked': question, 'sameTask': task.id == first})
        except Answered:
            return 0
        if push_url:
            # The four config methods on the finished task.
            made = await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, url=push_url + '/2'),
                context=ctx)
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id=made.id),
                context=ctx)
            configs = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id), context=ctx)
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task.id, id=made.id),
                context=ctx)
            after = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id), context=ctx)
            asked['push'] = {'taskId': task.id, 'created': made.id, 'got': got.url,
                              'listed': len(configs.configs),
                              'afterDelete': len(after.configs)}
        if cancel:
            try:
                await client.cancel_task(CancelTaskRequest(id=task.id), context=ctx)
                asked['cancel'] = 'canceled'
            except Exception as e:  # noqa: BLE001
                asked['cancel'] = type(e).__name__
        if list_after:
            page = await client.list_tasks(
                ListTasksRequest(context_id=task.context_id, include_artifacts=True),
                context=ctx)
            asked['listed'] = [{'id': t.id, 'state': state_name(t.status.state),
                                 'text': task_text(t)} for t in page.tasks]
            asked['totalSize'] = page.total_size
        emit(state_name(task.status.state), task_text(task))
        return 0 if task.status.state == TaskState.TASK_STATE_COMPLETED else 2
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('card_url')
    parser.add_argument('text')
    parser.add_argument('--legacy', '--v03', dest='legacy', action='store_true',
                        help="use the SDK's v0.3 compatible JSON-RPC transport")
    parser.add_argument('--non-blocking', action='store_true',
                        help='returnImmediately=true; poll GetTask instead')
    parser.add_argument('--stream', action='store_true',
                        help='use the SDK streaming path (SSE); adds "events" to the output')
    parser.add_argument('--answer', default=None,
                        help='answer an input-required / auth-required task with this text')
    parser.add_argument('--list', action='store_true',
                        help='then ListTasks of the task\'s context; adds "listed" and "totalSize"')
    parser.add_argument('--push', metavar='URL',
                        help='send with this webhook, then create/get/list/delete a config; adds "push"')
    parser.add_argument('--rest', action='store_true',
                        help="use the SDK's HTTP+JSON (REST) transport")
    parser.add_argument('--cancel', action='store_true',
                        help='then CancelTask the finished task; adds "cancel"')
    parser.add_argument('--drop-after', type=int, metavar='N',
                        help='with --stream: drop the stream after N events, then SubscribeToTask '
                             '(at --resubscribe, else the same agent); a {"kind": "dropped"} '
                             'event marks where')
    parser.add_argument('--resubscribe', metavar='CARD_URL',
                        help='the agent card of the replica --drop-after resubscribes at')
    parser.add_argument('--api-key-env', metavar='NAME',
                        help="the API key for the card's apiKey schemes, from env NAME")
    parser.add_argument('--bearer-env', metavar='NAME',
                        help="the bearer token for the card's http/oauth2/oidc schemes, from env NAME")
    args = parser.parse_args()
    if args.stream and args.non_blocking:
        print('error: --stream and --non-blocking are mutually exclusive', file=sys.stderr)
        sys.exit(1)
    try:
        rc = asyncio.run(run(args.card_url, args.text, args.legacy, args.non_blocking,
                             args.stream, args.answer, args.list, args.push,
                             args.rest, args.cancel, args.api_key_env, args.bearer_env,
                             args.drop_after, args.resubscribe))
    except Exception as e:  # noqa: BLE001
        msg = ' | '.join(line.strip() for line in str(e).splitlines() if line.strip())
        print(f'error: {type(e).__name__}: {msg}', file=sys.stderr)
        rc = 1
    sys.stdout.flush()
    sys.exit(rc)


if __name__ == '__main__':
    main()
