"""Keys, a JWKS and JWTs for the auth tests, made with PyJWT and cryptography.

Usage:  .venv/bin/python jwt_tool.py keys DIR
        .venv/bin/python jwt_tool.py tokens DIR SPECS_JSON
        .venv/bin/python jwt_tool.py serve-jwks DIR

keys DIR
  Makes DIR and writes fresh signing keys into it: rs1.pem, rs2.pem, rs3.pem
  (RSA 2048, RS256) and ec1.pem (P-256, ES256), their public halves as
  KID.pub.pem, and DIR/jwks.json: the public JWKS the test's issuer publishes,
  with rs1 and ec1 only (rs2 and rs3 are keys the server has not seen; a test
  that rotates keys rewrites jwks.json, see `publish` below). Prints the JWKS.

tokens DIR SPECS_JSON
  SPECS_JSON is a JSON object {name: spec}; prints one JSON object {name: token}.
  A spec is an object; every key is optional:
    kid     the signing key's id in DIR (default "rs1"); its alg follows from
            the key (rs* RS256, ec* ES256)
    claims  the payload; "now+N" / "now-N" string values of exp, nbf and iat
            are seconds from now (default {"iat": "now", "exp": "now+300"})
    attack  one of
            "none"       header {"alg": "none"}, no signature
            "confusion"  header {"alg": "HS256", "kid": KID}, HMAC-SHA256 keyed
                         with the bytes of KID's *public* PEM (algorithm
                         confusion: a verifier that takes the alg from the token
                         and uses the RSA public key as an HMAC secret accepts it)
            "tampered"   a valid RS256 token whose payload is replaced by
                         claims_tampered (signature kept)
            "garbage"    three base64url-looking parts that decode to nothing
    claims_tampered  the payload put into a "tampered" token
    publish  (not a token) a list of kids: rewrites DIR/jwks.json with exactly
             those public keys; its value in the output is the new JWKS

serve-jwks DIR
  A tiny http.server on 127.0.0.1 (free port). First stdout line:
  "listening on http://127.0.0.1:PORT". Serves
    GET /jwks.json                          DIR/jwks.json as it is now
                                            (Cache-Control: max-age=300)
    GET /.well-known/openid-configuration   {"issuer": ..., "jwks_uri": .../jwks.json}
                                            (issuer: env JWT_ISSUER, default
                                            http://127.0.0.1:PORT)
    GET /count                              {"jwks": N, "discovery": M}: the
                                            requests for each so far
  Runs until killed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

RSA_KIDS = ('rs1', 'rs2', 'rs3')
EC_KIDS = ('ec1',)
PUBLISHED = ('rs1', 'ec1')


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b'=').decode('ascii')


def alg_of(kid: str) -> str:
    return 'ES256' if kid.startswith('ec') else 'RS256'


def private_key(folder: str, kid: str):
    with open(os.path.join(folder, f'{kid}.pem'), 'rb') as f:
        return serialization.load_pem_private_key(f.read(), password=None)


def public_pem(folder: str, kid: str) -> bytes:
    with open(os.path.join(folder, f'{kid}.pub.pem'), 'rb') as f:
        return f.read()


def jwk_of(folder: str, kid: str) -> dict:
    key = private_key(folder, kid).public_key()
    algo = ECAlgorithm if kid.startswith('ec') else RSAAlgorithm
    jwk = json.loads(algo.to_jwk(key))
    jwk.update({'kid': kid, 'use': 'sig', 'alg': alg_of(kid)})
    return jwk


def publish(folder: str, kids) -> dict:
    jwks = {'keys': [jwk_of(folder, kid) for kid in kids]}
    tmp = os.path.join(folder, 'jwks.json.tmp')
    with open(tmp, 'w') as f:
        json.dump(jwks, f)
    os.replace(tmp, os.path.join(folder, 'jwks.json'))
    return jwks


def make_keys(folder: str) -> dict:
    os.makedirs(folder, exist_ok=True)
    for kid in RSA_KIDS + EC_KIDS:
        if kid.startswith('ec'):
            key = ec.generate_private_key(ec.SECP256R1())
        else:
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        with open(os.path.join(folder, f'{kid}.pem'), 'wb') as f:
            f.write(key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
        with open(os.path.join(folder, f'{kid}.pub.pem'), 'wb') as f:
            f.write(key.public_key().public_bytes(
                serialization.Encoding.PEM,
                serialization.PublicFormat.SubjectPublicKeyInfo))
    return publish(folder, PUBLISHED)


def resolve_claims(claims: dict, now: int) -> dict:
    out = {}
    for name, value in claims.items():
        if isinstance(value, str) and value.startswith('now'):
            rest = value[3:]
            out[name] = now + (int(rest) if rest else 0)
        else:
            out[name] = value
    return out


def unsigned(header: dict, claims: dict) -> str:
    h = b64url(json.dumps(header, separators=(',', ':')).encode())
    p = b64url(json.dumps(claims, separators=(',', ':')).encode())
    return f'{h}.{p}'


def token(folder: str, spec: dict, now: int) -> str:
    kid = spec.get('kid', 'rs1')
    claims = resolve_claims(spec.get('claims', {'iat': 'now', 'exp': 'now+300'}), now)
    attack = spec.get('attack')
    if attack is None:
        return jwt.encode(claims, private_key(folder, kid), algorithm=alg_of(kid),
                          headers={'kid': kid})
    if attack == 'none':
        return unsigned({'alg': 'none', 'typ': 'JWT', 'kid': kid}, claims) + '.'
    if attack == 'confusion':
        # PyJWT itself refuses a PEM public key as an HMAC secret, so the
        # forgery is made by hand, as an attacker would.
        head = unsigned({'alg': 'HS256', 'typ': 'JWT', 'kid': kid}, claims)
        mac = hmac.new(public_pem(folder, kid), head.encode('ascii'), hashlib.sha256)
        return f'{head}.{b64url(mac.digest())}'
    if attack == 'tampered':
        good = jwt.encode(claims, private_key(folder, kid), algorithm=alg_of(kid),
                          headers={'kid': kid})
        head, _, sig = good.split('.')
        forged = resolve_claims(spec['claims_tampered'], now)
        body = b64url(json.dumps(forged, separators=(',', ':')).encode())
        return f'{head}.{body}.{sig}'
    if attack == 'garbage':
        return 'eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl'
    raise SystemExit(f'unknown attack {attack!r}')


def make_tokens(folder: str, specs: dict) -> dict:
    now = int(time.time())
    out = {}
    for name, spec in specs.items():
        if 'publish' in spec:
            out[name] = publish(folder, spec['publish'])
        else:
            out[name] = token(folder, spec, now)
    return out


def serve_jwks(folder: str) -> None:
    counts = {'jwks': 0, 'discovery': 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def answer(self, status: int, body: dict, cache: bool = False) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header('Content-Type', 'application/json')
            self.send_header('Content-Length', str(len(data)))
            if cache:
                self.send_header('Cache-Control', 'max-age=300')
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802
            base = f'http://127.0.0.1:{self.server.server_address[1]}'
            if self.path == '/jwks.json':
                with lock:
                    counts['jwks'] += 1
                with open(os.path.join(folder, 'jwks.json')) as f:
                    self.answer(200, json.load(f), cache=True)
            elif self.path == '/.well-known/openid-configuration':
                with lock:
                    counts['discovery'] += 1
                self.answer(200, {'issuer': os.environ.get('JWT_ISSUER', base),
                                  'jwks_uri': f'{base}/jwks.json'}, cache=True)
            elif self.path == '/count':
                with lock:
                    self.answer(200, dict(counts))
            else:
                self.answer(404, {'error': 'not found'})

    server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    server.daemon_threads = True
    print(f'listening on http://127.0.0.1:{server.server_address[1]}', flush=True)
    server.serve_forever()


def main() -> None:
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    command, folder = sys.argv[1], sys.argv[2]
    if command == 'keys':
        print(json.dumps(make_keys(folder)))
    elif command == 'tokens' and len(sys.argv) == 4:
        print(json.dumps(make_tokens(folder, json.loads(sys.argv[3]))))
    elif command == 'serve-jwks':
        serve_jwks(folder)
    else:
        raise SystemExit(__doc__)


if __name__ == '__main__':
    main()
