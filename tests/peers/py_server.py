"""Official a2a-sdk (Python) A2A peer server for interop tests.

Usage:  .venv/bin/python py_server.py --port P [--compat-03 [--card-03]] [--rest-only [--tenant T]]
            [--no-streaming]
            [--auth-bearer TOKEN | --auth-oauth CLIENT_ID:SECRET [--oauth-ttl S]]
            [--db-url postgresql+asyncpg://USER@HOST:PORT/DB]

Serves (single uvicorn/Starlette app on 127.0.0.1:P):
  GET  /.well-known/agent-card.json   agent card
  POST /                              JSON-RPC (A2A 1.0; plus 0.3 with --compat-03)
With --rest-only, HTTP+JSON (the SDK's create_rest_routes at the root, also
under /{tenant}; the 0.3 /v1 routes with --compat-03) instead of JSON-RPC, and
a card that lists only HTTP+JSON interfaces (with `tenant` T when given).

Protected (for our client's auth tests), everything but the card needs a credential
(HTTP 401 with `WWW-Authenticate: Bearer` otherwise), and the card declares it:
  --auth-bearer TOKEN   `Authorization: Bearer TOKEN`; card scheme `bearer`
                        (httpAuthSecurityScheme), required.
  --auth-oauth ID:SECRET  tokens from this server's own OAuth2 token endpoint
                        POST /oauth/token (client credentials, client by HTTP
                        Basic, tokens `tok-N` valid --oauth-ttl seconds, default
                        3600); card scheme `oauth` (oauth2SecurityScheme with that
                        tokenUrl, scope `a2a.call`), required.
                        GET /oauth/stats -> {"tokenRequests": N, "unauthorized": N,
                        "scopes": [..]}; POST /oauth/revoke invalidates every token.

With --db-url, tasks live in the SDK's own DatabaseTaskStore (SQLAlchemy) on that
database instead of its InMemoryTaskStore: the comparison run of
host-native/benches/replicas.rs. Needs `a2a-sdk[postgresql]` (SQLAlchemy and
asyncpg), which the pinned test venv does not install; the bench says how.

Prints exactly one line `listening on http://127.0.0.1:P` (flushed) when ready.
Exits cleanly on SIGTERM / SIGINT.

Agent behaviour (decided by the user text, A2A messages carry no skill id):
  * task goes `working`, ~150 ms pause, then
  * text starts with "fail"  -> `failed`, status message (role agent)
                                 "deliberate failure: <text>"
  * text starts with "slow"  -> stays `working` 5 s, then completes like echo;
                                 CancelTask ends it `canceled`
  * text starts with "ask"   -> `input-required`, status message (role agent)
                                 "Which city?"; a message continuing that task
                                 (its taskId) completes it with one artifact
                                 "booked for <text>"
  * otherwise                -> `completed` with one artifact, one text part
                                 "echo: <text>"
except for two texts that skip the ~150 ms pause (`working` is published at once):
  * "sleep N" (N = integer ms, 0..600000, e.g. "sleep 2000")
                             -> `working`, waits N ms (N=0: no wait at all), then
                                completes exactly like echo (artifact
                                "echo: sleep N"); the completed status timestamp
                                is taken when it settles. CancelTask during the
                                wait ends it `canceled`.
  * "chunks N" (N = integer, 0..100)
                             -> `working`, then N artifact-update events for ONE
                                artifact (name "chunks", one id), 100 ms before
                                each, text "chunk i", append=true for i>0,
                                lastChunk=true on the last; then `completed`
                                (the stored task ends with one artifact holding
                                N text parts). CancelTask -> `canceled`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import signal
import sys
import uuid

import uvicorn

from starlette.applications import Starlette

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    ClientCredentialsOAuthFlow,
    HTTPAuthSecurityScheme,
    OAuth2SecurityScheme,
    OAuthFlows,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    Part,
    Task,
    TaskState,
    TaskStatus,
)


HOST = '127.0.0.1'
WORK_DELAY_S = 0.15
SLOW_DELAY_S = 5.0
CHUNK_DELAY_S = 0.1
MAX_SLEEP_MS = 600_000
MAX_CHUNKS = 100
SLEEP_RE = re.compile(r'sleep (\d+)(?:\s|$)')
CHUNKS_RE = re.compile(r'chunks (\d+)(?:\s|$)')

log = logging.getLogger('py_server')


class PeerExecutor(AgentExecutor):
    """echo / fail / slow agent."""

    async def execute(
        self, context: RequestContext, event_queue: EventQueue
    ) -> None:
        task_id = context.task_id or ''
        context_id = context.context_id or ''
        text = context.get_user_input()

        if context.current_task is None and context.message is not None:
            # The first event of a new task must be the Task itself.
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message],
                )
            )

        updater = TaskUpdater(
            event_queue=event_queue, task_id=task_id, context_id=context_id
        )
        await updater.start_work()

        sleep_match = SLEEP_RE.match(text)
        chunks_match = CHUNKS_RE.match(text)
        if sleep_match:
            # "sleep N": no 150 ms pause; N = 0 means no await at all.
            # Cancellation: like `slow` (CancelledError, then cancel()).
            ms = min(int(sleep_match.group(1)), MAX_SLEEP_MS)
            if ms > 0:
                await asyncio.sleep(ms / 1000)
            await self._echo(updater, text)
            return
        if chunks_match:
            n = min(int(chunks_match.group(1)), MAX_CHUNKS)
            artifact_id = str(uuid.uuid4())
            for i in range(n):
                await asyncio.sleep(CHUNK_DELAY_S)
                await updater.add_artifact(
                    parts=[Part(text=f'chunk {i}')],
                    artifact_id=artifact_id,
                    name='chunks',
                    append=i > 0,
                    last_chunk=i == n - 1,
                )
            await updater.complete()
            return

        await asyncio.sleep(WORK_DELAY_S)

        if context.current_task is not None:
            # An answer on an existing task (it asked a question): book it.
            await updater.add_artifact(
                parts=[Part(text=f'booked for {text}')], name='booking', last_chunk=True
            )
            await updater.complete()
            return

        if text.startswith('traceparent'):
            # What W3C trace context the call came with (issue 22's peer check).
            headers = context.call_context.state.get('headers', {})
            seen = headers.get('traceparent', 'none')
            await updater.add_artifact(
                parts=[Part(text=f'traceparent: {seen}')], name='trace', last_chunk=True
            )
            await updater.complete()
            return

        if text.startswith('ask'):
            await updater.requires_input(
                updater.new_agent_message(parts=[Part(text='Which city?')])
            )
            return

        if text.startswith('fail'):
            await updater.failed(
                updater.new_agent_message(
                    parts=[Part(text=f'deliberate failure: {text}')]
                )
            )
            return

        if text.startswith('slow'):
            # Cancellation: the SDK cancels this coroutine (CancelledError)
            # and calls cancel() below, which publishes CANCELED.
            await asyncio.sleep(SLOW_DELAY_S)

        await self._echo(updater, text)

    @staticmethod
    async def _echo(updater: TaskUpdater, text: str) -> None:
        await updater.add_artifact(
            parts=[Part(text=f'echo: {text}')],
            name='echo',
            last_chunk=True,
        )
        # complete() stamps status.timestamp with the current time.
        await updater.complete()

    async def cancel(
        self, context: RequestContext, event_queue: EventQueue
    ) -> None:
        updater = TaskUpdater(
            event_queue=event_queue,
            task_id=context.task_id or '',
            context_id=context.context_id or '',
        )
        await updater.cancel()


class Guard:
    """ASGI middleware: a credential on every request but the card's, and
    the OAuth2 token endpoint when tokens are issued here."""

    def __init__(self, app, bearer: str | None, oauth: str | None, ttl: int):
        self.app = app
        self.bearer = bearer
        self.oauth = oauth
        self.ttl = ttl
        self.tokens: dict[str, float] = {}
        self.issued = 0
        self.stats = {'tokenRequests': 0, 'unauthorized': 0, 'scopes': []}

    async def send_json(self, send, status: int, body: dict, extra=()) -> None:
        import json

        data = json.dumps(body).encode()
        headers = [(b'content-type', b'application/json'), *extra]
        await send({'type': 'http.response.start', 'status': status, 'headers': headers})
        await send({'type': 'http.response.body', 'body': data})

    async def read_body(self, receive) -> bytes:
        body = b''
        while True:
            message = await receive()
            body += message.get('body', b'')
            if not message.get('more_body'):
                return body

    async def token(self, scope, receive, send) -> None:
        import base64
        import time
        from urllib.parse import parse_qs, unquote_plus

        self.stats['tokenRequests'] += 1
        form = parse_qs((await self.read_body(receive)).decode())
        auth = dict(scope['headers']).get(b'authorization', b'').decode()
        client = ''
        if auth.startswith('Basic '):
            pair = base64.b64decode(auth[6:]).decode()
            cid, _, secret = pair.partition(':')
            client = f'{unquote_plus(cid)}:{unquote_plus(secret)}'
        if form.get('grant_type') != ['client_credentials']:
            await self.send_json(send, 400, {'error': 'unsupported_grant_type'})
            return
        if client != self.oauth:
            await self.send_json(send, 401, {'error': 'invalid_client'})
            return
        self.stats['scopes'] = form.get('scope', [''])[0].split()
        self.issued += 1
        token = f'tok-{self.issued}'
        self.tokens[token] = time.monotonic() + self.ttl
        await self.send_json(
            send, 200, {'access_token': token, 'token_type': 'Bearer', 'expires_in': self.ttl}
        )

    def allowed(self, scope) -> bool:
        import time

        auth = dict(scope['headers']).get(b'authorization', b'').decode()
        if self.bearer is not None:
            return auth == f'Bearer {self.bearer}'
        token = auth.removeprefix('Bearer ')
        return self.tokens.get(token, 0) > time.monotonic()

    async def __call__(self, scope, receive, send):
        if scope['type'] != 'http' or (self.bearer is None and self.oauth is None):
            return await self.app(scope, receive, send)
        path = scope['path']
        if path.startswith('/.well-known/'):
            return await self.app(scope, receive, send)
        if self.oauth is not None and path == '/oauth/token':
            return await self.token(scope, receive, send)
        if self.oauth is not None and path == '/oauth/stats':
            return await self.send_json(send, 200, self.stats)
        if self.oauth is not None and path == '/oauth/revoke':
            self.tokens.clear()
            return await self.send_json(send, 200, {})
        if not self.allowed(scope):
            self.stats['unauthorized'] += 1
            return await self.send_json(
                send, 401, {'error': 'unauthorized'}, [(b'www-authenticate', b'Bearer')]
            )
        return await self.app(scope, receive, send)


def security(port: int, bearer: str | None, oauth: str | None) -> dict:
    """The card's securitySchemes and securityRequirements for the guard."""
    if bearer is not None:
        scheme = SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme='Bearer'))
        name = 'bearer'
    elif oauth is not None:
        flow = ClientCredentialsOAuthFlow(
            token_url=f'http://{HOST}:{port}/oauth/token', scopes={'a2a.call': 'call the agent'}
        )
        scheme = SecurityScheme(
            oauth2_security_scheme=OAuth2SecurityScheme(flows=OAuthFlows(client_credentials=flow))
        )
        name = 'oauth'
    else:
        return {}
    scopes = ['a2a.call'] if name == 'oauth' else []
    return {
        'security_schemes': {name: scheme},
        'security_requirements': [SecurityRequirement(schemes={name: StringList(list=scopes)})],
    }


# --no-streaming: the card says `streaming: false` (clients then send
# SendMessage, never SendStreamingMessage; the server still streams if asked).
STREAMING = True


def build_card(port: int, compat_03: bool, rest_only: bool = False,
               tenant: str = '', **secured) -> AgentCard:
    url = f'http://{HOST}:{port}/'
    binding = 'HTTP+JSON' if rest_only else 'JSONRPC'
    if rest_only:
        url = f'http://{HOST}:{port}'
    interfaces = [
        AgentInterface(protocol_binding=binding, protocol_version='1.0', url=url,
                       tenant=tenant)
    ]
    if compat_03 == 'only':
        # --card-03: the card lists only the 0.3 interface (served as well).
        interfaces.clear()
    if compat_03:
        # The SDK only routes a binding to v0.3 clients if the card says so.
        interfaces.append(
            AgentInterface(
                protocol_binding=binding, protocol_version='0.3', url=url
            )
        )
    return AgentCard(
        name='py-agent',
        description='a2a-sdk (Python) interop peer: echo / fail / slow',
        version='1.0.0',
        provider=AgentProvider(organization='interop-tests', url='http://127.0.0.1/'),
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=STREAMING, push_notifications=False),
        **secured,
        default_input_modes=['text/plain'],
        default_output_modes=['text/plain'],
        skills=[
            AgentSkill(
                id='echo',
                name='echo',
                description='Echo the task back',
                tags=['echo'],
                examples=['hello'],
            ),
            AgentSkill(
                id='fail',
                name='fail',
                description='Always fails',
                tags=['fail'],
                examples=['fail please'],
            ),
        ],
    )


def build_app(port: int, compat_03: bool, rest_only: bool = False, tenant: str = '',
              bearer=None, oauth=None, ttl=3600, task_store=None):
    card = build_card(port, compat_03, rest_only, tenant, **security(port, bearer, oauth))
    handler = DefaultRequestHandler(
        agent_executor=PeerExecutor(),
        task_store=task_store or InMemoryTaskStore(),
        agent_card=card,
    )
    routes = []
    routes += create_agent_card_routes(agent_card=card)
    if rest_only:
        routes += create_rest_routes(
            request_handler=handler, enable_v0_3_compat=compat_03
        )
    else:
        routes += create_jsonrpc_routes(
            request_handler=handler, rpc_url='/', enable_v0_3_compat=compat_03
        )
    return Guard(Starlette(routes=routes), bearer, oauth, ttl)


async def database_store(url: str):
    """The SDK's DatabaseTaskStore on `url`, its table created before the
    first request (replicas are started one after the other)."""
    from a2a.server.tasks import DatabaseTaskStore
    from sqlalchemy.ext.asyncio import create_async_engine

    store = DatabaseTaskStore(create_async_engine(url, pool_size=20))
    await store.initialize()
    return store


async def serve(port: int, compat_03: bool, rest_only: bool = False, tenant: str = '',
                bearer=None, oauth=None, ttl=3600, db_url=None) -> None:
    store = await database_store(db_url) if db_url else None
    config = uvicorn.Config(
        build_app(port, compat_03, rest_only, tenant, bearer, oauth, ttl, store),
        host=HOST,
        port=port,
        log_level=os.environ.get('PEER_LOG_LEVEL', 'warning'),
        lifespan='off',
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    # uvicorn installs SIGINT/SIGTERM handlers that set should_exit.
    serve_task = asyncio.create_task(server.serve())
    while not server.started:
        if serve_task.done():
            await serve_task  # re-raise startup error
            raise SystemExit(1)  # bind failure: uvicorn exits the process
        await asyncio.sleep(0.02)
    sys.stdout.write(f'listening on http://{HOST}:{port}\n')
    sys.stdout.flush()
    await serve_task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--port', type=int, required=True)
    parser.add_argument(
        '--compat-03',
        action='store_true',
        help='enable the SDK v0.3 JSON-RPC compatibility layer',
    )
    parser.add_argument('--card-03', action='store_true',
                        help='with --compat-03: the card lists only the 0.3 interface')
    parser.add_argument('--rest-only', action='store_true',
                        help='serve HTTP+JSON (REST) only; the card lists only it')
    parser.add_argument('--tenant', default='',
                        help='the tenant the card\'s interfaces name (with --rest-only)')
    parser.add_argument('--auth-bearer', metavar='TOKEN')
    parser.add_argument('--auth-oauth', metavar='CLIENT_ID:SECRET')
    parser.add_argument('--oauth-ttl', type=int, default=3600)
    parser.add_argument('--db-url', metavar='URL',
                        help='tasks in the SDK DatabaseTaskStore at this SQLAlchemy URL')
    parser.add_argument('--no-streaming', action='store_true',
                        help='the card says capabilities.streaming: false')
    args = parser.parse_args()
    global STREAMING
    STREAMING = not args.no_streaming
    logging.basicConfig(
        level=os.environ.get('PEER_LOG_LEVEL', 'WARNING').upper(),
        stream=sys.stderr,
    )
    # SIGTERM before uvicorn installs its handlers: just exit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    compat = 'only' if args.compat_03 and args.card_03 else args.compat_03
    asyncio.run(
        serve(args.port, compat, args.rest_only, args.tenant,
              args.auth_bearer, args.auth_oauth, args.oauth_ttl, args.db_url)
    )


if __name__ == '__main__':
    main()
