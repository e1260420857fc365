"""Dumb logging A2A endpoint: records exactly what a client sends.

Usage:  python3 capture_server.py --port P [--card FILE] [--log FILE]

Stdlib only (any python3). Serves on 127.0.0.1:P:
  GET  /.well-known/agent-card.json   the card from --card (default: a
                                      minimal 1.0 card + a 0.3 JSONRPC
                                      interface); "{URL}" in the file is
                                      replaced by http://127.0.0.1:P/
  POST / (any path)                   JSON-RPC; answers every call with a
                                      canned COMPLETED task ("echo: <text>"),
                                      1.0-shaped for SendMessage/GetTask/...,
                                      0.3-shaped (kind fields, lowercase
                                      enums) for message/send, tasks/get, ...
Every request is logged as one JSON line {"method","path","headers","body"}
to --log (default stdout). Prints `listening on http://127.0.0.1:P` first.
Importable: `make_server(port, card_fn, respond_fn, log_fn)` for custom
cards/responses in exploratory tests.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def default_card(url: str) -> dict:
    return {
        'name': 'capture',
        'description': 'logging capture endpoint',
        'version': '1.0.0',
        'supportedInterfaces': [
            {'url': url, 'protocolBinding': 'JSONRPC', 'protocolVersion': '1.0'},
            {'url': url, 'protocolBinding': 'JSONRPC', 'protocolVersion': '0.3'},
        ],
        'capabilities': {'streaming': False},
        'defaultInputModes': ['text/plain'],
        'defaultOutputModes': ['text/plain'],
        'skills': [{'id': 'echo', 'name': 'echo', 'description': 'Echo', 'tags': ['echo']}],
    }


def _text_of(params: dict) -> str:
    parts = (params.get('message') or {}).get('parts') or []
    return '\n'.join(p.get('text', '') for p in parts if isinstance(p, dict) and 'text' in p)


def default_respond(req: dict) -> dict:
    """Canned JSON-RPC response for a parsed request body."""
    method = req.get('method', '')
    params = req.get('params') or {}
    rid = req.get('id')
    tid, cid = 'task-1', 'ctx-1'
    text = _text_of(params) or 'x'
    if '/' in method:  # v0.3 method names
        task = {
            'kind': 'task', 'id': params.get('id', tid), 'contextId': cid,
            'status': {'state': 'completed', 'timestamp': '2025-01-01T00:00:00Z'},
            'artifacts': [{'artifactId': 'a1', 'parts': [{'kind': 'text', 'text': f'echo: {text}'}]}],
            'history': [],
        }
        return {'jsonrpc': '2.0', 'id': rid, 'result': task}
    task = {
        'id': params.get('id', tid), 'contextId': cid,
        'status': {'state': 'TASK_STATE_COMPLETED', 'timestamp': '2025-01-01T00:00:00Z'},
        'artifacts': [{'artifactId': 'a1', 'parts': [{'text': f'echo: {text}'}]}],
    }
    if method in ('SendMessage',):
        return {'jsonrpc': '2.0', 'id': rid, 'result': {'task': task}}
    if method in ('GetTask', 'CancelTask'):
        return {'jsonrpc': '2.0', 'id': rid, 'result': task}
    return {'jsonrpc': '2.0', 'id': rid, 'error': {'code': -32601, 'message': 'Method not found'}}


def make_server(port, card_fn=default_card, respond_fn=default_respond, log_fn=None):
    url = f'http://127.0.0.1:{port}/'
    lock = threading.Lock()

    def log(entry):
        with lock:
            if log_fn:
                log_fn(entry)
            else:
                sys.stdout.write(json.dumps(entry) + '\n')
                sys.stdout.flush()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def log_message(self, *a):  # silence default stderr logging
            pass

        def _send(self, status, obj, ctype='application/json'):
            data = json.dumps(obj).encode() if not isinstance(obj, bytes) else obj
            self.send_response(status)
            self.send_header('Content-Type', ctype)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            log({'method': 'GET', 'path': self.path, 'headers': dict(self.headers.items()), 'body': None})
            if self.path.split('?')[0].endswith('agent-card.json'):
                card = card_fn(url)
                if card is None:
                    self._send(404, {'error': 'no card'})
                else:
                    self._send(200, card)
            else:
                self._send(404, {'error': 'not found'})

        def do_POST(self):
            n = int(self.headers.get('Content-Length') or 0)
            raw = self.rfile.read(n) if n else b''
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode('utf-8', 'replace')
            log({'method': 'POST', 'path': self.path, 'headers': dict(self.headers.items()), 'body': body})
            if not isinstance(body, dict):
                self._send(200, {'jsonrpc': '2.0', 'id': None, 'error': {'code': -32700, 'message': 'Parse error'}})
                return
            resp = respond_fn(body)
            if isinstance(resp, tuple):  # (status, obj)
                self._send(*resp)
            else:
                self._send(200, resp)

    return ThreadingHTTPServer(('127.0.0.1', port), Handler)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--port', type=int, required=True)
    ap.add_argument('--card', help='card JSON file; {URL} is replaced')
    ap.add_argument('--log', help='append JSON lines here instead of stdout')
    args = ap.parse_args()
    card_fn = default_card
    if args.card:
        template = open(args.card, encoding='utf-8').read()
        card_fn = lambda url: json.loads(template.replace('{URL}', url))  # noqa: E731
    log_fn = None
    if args.log:
        fh = open(args.log, 'a', encoding='utf-8')
        def log_fn(entry):
            fh.write(json.dumps(entry) + '\n')
            fh.flush()
    server = make_server(args.port, card_fn, default_respond, log_fn)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    sys.stdout.write(f'listening on http://127.0.0.1:{args.port}\n')
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    server.server_close()


if __name__ == '__main__':
    main()
