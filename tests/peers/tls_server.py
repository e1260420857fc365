"""A tiny HTTPS A2A endpoint for the credential-origin tests (127.0.0.1 only).

Usage:
  python tls_server.py --make-certs DIR
      writes DIR/ca.pem (a test CA), DIR/cert.pem and DIR/key.pem (a server
      certificate for 127.0.0.1 signed by it), then exits.
  python tls_server.py --port P --cert CERT --key KEY [--card-endpoint URL]
      serves https://127.0.0.1:P: GET /.well-known/agent-card.json is a card
      named "far" whose endpoint is URL (default: this server); every POST is
      answered with a completed task whose text says which credentials came:
      "authorization=present|absent x-secret=present|absent".
Prints exactly one line `listening on https://127.0.0.1:P` when ready.
"""

import argparse
import datetime
import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def make_certs(folder: str) -> None:
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'toolnexus test CA')])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, '127.0.0.1')]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address('127.0.0.1'))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    with open(f'{folder}/ca.pem', 'wb') as f:
        f.write(ca.public_bytes(pem))
    with open(f'{folder}/cert.pem', 'wb') as f:
        f.write(cert.public_bytes(pem))
    with open(f'{folder}/key.pem', 'wb') as f:
        f.write(
            key.private_bytes(
                pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )


def serve(port: int, cert: str, key: str, endpoint: str | None) -> None:
    own = f'https://127.0.0.1:{port}/'

    class Handler(BaseHTTPRequestHandler):
        protocol_version = 'HTTP/1.1'

        def log_message(self, *args):
            pass

        def answer(self, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.answer({'name': 'far', 'url': endpoint or own, 'skills': [{'id': 's'}]})

        def do_POST(self):
            length = int(self.headers.get('Content-Length') or 0)
            request = json.loads(self.rfile.read(length) or b'{}')
            seen = ' '.join(
                f'{h.lower()}={"present" if self.headers.get(h) else "absent"}'
                for h in ('Authorization', 'X-Secret')
            )
            task = {
                'id': 't1',
                'contextId': 'c',
                'status': {'state': 'completed'},
                'artifacts': [{'artifactId': 'a', 'parts': [{'kind': 'text', 'text': seen}]}],
            }
            self.answer({'jsonrpc': '2.0', 'id': request.get('id'), 'result': task})

    server = ThreadingHTTPServer(('127.0.0.1', port), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    sys.stdout.write(f'listening on https://127.0.0.1:{port}\n')
    sys.stdout.flush()
    server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--make-certs', metavar='DIR')
    parser.add_argument('--port', type=int)
    parser.add_argument('--cert')
    parser.add_argument('--key')
    parser.add_argument('--card-endpoint')
    args = parser.parse_args()
    if args.make_certs:
        make_certs(args.make_certs)
        return
    serve(args.port, args.cert, args.key, args.card_endpoint)


if __name__ == '__main__':
    main()
