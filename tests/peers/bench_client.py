"""Per-call latency client for benchmarks (official a2a-sdk Python client).

Usage:  .venv/bin/python bench_client.py CARD_URL [--text T] [--warmup W] [--n N]
                                          [--methods m1,m2]

  CARD_URL   full URL of the agent card, e.g.
             http://127.0.0.1:P/.well-known/agent-card.json
  --text     task text (default "sleep 0": on the peer servers, working then
             completed at once, no artificial pause)
  --warmup   untimed calls per method before measuring (default 20)
  --n        timed calls per method (default 200)
  --methods  comma list, default both, run in this order:
    py-sdk-send     ClientFactory(ClientConfig(streaming=False)) client, A2A 1.0:
                    Client.send_message() = one blocking SendMessage
    py-sdk-stream   ClientFactory(ClientConfig(streaming=True)) client, A2A 1.0:
                    Client.send_message() = SendStreamingMessage (SSE), consumed
                    until the stream ends

Twin of js/bench_client.mjs (same output). Calls are sequential (one in
flight), each bounded to 30 s. Wall time per call = time.perf_counter_ns() from
just before send_message() to: its single result (py-sdk-send); the first
event with a terminal state (py-sdk-stream — the rest of the stream is then
drained untimed). Card fetch and client creation are untimed; each client keeps
its own httpx.AsyncClient (keep-alive). Every call (warm-up included) must end
in a COMPLETED task, otherwise the reason goes to stderr and the exit code is 1.

Output: one JSON line per method on stdout:
  {"method": "py-sdk-send", "n": 200, "p50_ms": 2.345, "p90_ms": 2.789, "min_ms": 2.001}
(nearest-rank percentiles, 3 decimals). Exit 0 ok, 1 failure, 2 usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
import uuid

from a2a.client import ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState


CALL_TIMEOUT_S = 30.0
MAX_CALLS = 1_000_000
ALL_METHODS = ['py-sdk-send', 'py-sdk-stream']
TERMINAL = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
    TaskState.TASK_STATE_INPUT_REQUIRED,
    TaskState.TASK_STATE_AUTH_REQUIRED,
}


class BenchError(Exception):
    pass


def request(text: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)]
        )
    )


def event_state(event) -> int | None:
    kind = event.WhichOneof('payload')
    if kind == 'task':
        return event.task.status.state
    if kind == 'status_update':
        return event.status_update.status.state
    return None


async def call_send(client, text: str) -> int:
    t0 = time.perf_counter_ns()
    events = [e async for e in client.send_message(request(text))]
    t1 = time.perf_counter_ns()
    if len(events) != 1 or event_state(events[0]) != TaskState.TASK_STATE_COMPLETED:
        raise BenchError(f'py-sdk-send: expected one COMPLETED task, got {events!r:.300}')
    return t1 - t0


async def call_stream(client, text: str) -> int:
    t0 = time.perf_counter_ns()
    t1 = None
    terminal = None
    n = 0
    async for event in client.send_message(request(text)):
        n += 1
        state = event_state(event)
        if terminal is None and state in TERMINAL:
            t1 = time.perf_counter_ns()
            terminal = state
    if terminal != TaskState.TASK_STATE_COMPLETED:
        name = TaskState.Name(terminal) if terminal is not None else 'none'
        raise BenchError(f'py-sdk-stream: stream of {n} events ended with terminal state {name}')
    return t1 - t0


def pct(sorted_ms: list[float], p: float) -> float:
    return sorted_ms[max(0, math.ceil(p * len(sorted_ms)) - 1)]


async def measure(method: str, call, warmup: int, n: int) -> None:
    async def bounded():
        async with asyncio.timeout(CALL_TIMEOUT_S):
            return await call()

    for _ in range(warmup):
        await bounded()
    ms = sorted([(await bounded()) / 1e6 for _ in range(n)])
    print(json.dumps({
        'method': method, 'n': n,
        'p50_ms': round(pct(ms, 0.5), 3), 'p90_ms': round(pct(ms, 0.9), 3),
        'min_ms': round(ms[0], 3),
    }), flush=True)


async def run(card_url: str, text: str, warmup: int, n: int, methods: list[str]) -> None:
    for method in methods:
        streaming = method == 'py-sdk-stream'
        factory = ClientFactory(ClientConfig(streaming=streaming))
        client = await factory.create_from_url(card_url, relative_card_path='/')
        try:
            if streaming and not client._card.capabilities.streaming:  # noqa: SLF001
                raise BenchError('py-sdk-stream: card says capabilities.streaming=false '
                                 '(the SDK would silently fall back to SendMessage)')
            fn = call_stream if streaming else call_send
            await measure(method, lambda: fn(client, text), warmup, n)
        finally:
            await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('card_url')
    parser.add_argument('--text', default='sleep 0')
    parser.add_argument('--warmup', type=int, default=20)
    parser.add_argument('--n', type=int, default=200)
    parser.add_argument('--methods', default=','.join(ALL_METHODS))
    args = parser.parse_args()
    methods = [m for m in args.methods.split(',') if m]
    bad = [m for m in methods if m not in ALL_METHODS]
    if bad or not 0 <= args.warmup <= MAX_CALLS or not 1 <= args.n <= MAX_CALLS:
        parser.error(f'unknown method(s) {bad}' if bad else
                     f'--warmup 0..{MAX_CALLS}, --n 1..{MAX_CALLS}')
    try:
        asyncio.run(run(args.card_url, args.text, args.warmup, args.n, methods))
    except Exception as e:  # noqa: BLE001
        msg = ' | '.join(line.strip() for line in str(e).splitlines() if line.strip())
        print(f'error: {type(e).__name__}: {msg}', file=sys.stderr)
        sys.exit(1)


if __name__ == '__main__':
    main()
