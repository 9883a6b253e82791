"""A local OpenID Connect provider for the identity tests: a stdlib ThreadingHTTPServer on
127.0.0.1, in a thread of the test process, that the platform's processes reach over real
sockets, as they would reach Keycloak or Okta.

It serves its discovery document (`<issuer>/.well-known/openid-configuration`), its key set
(`<issuer>/keys`, every request counted in `jwks_reads`) and a token endpoint
(`POST <issuer>/token`, the client-credentials grant with the user in `sub`: form fields
`sub`, `scope`, `audience`). Tokens are RS256 with the current key by default (ES256 with
`alg="ES256"`); `rotate()` makes a new key current, keeping or dropping the old one in the set.
`token(...)` signs a token directly, with any claim or header overridden, so that the tests can
make the bad ones (expired, other audience, unknown key, ...) the provider would never issue.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

REALM = "/realms/test"
_KIDS = itertools.count(1)


@dataclass
class SigningKey:
    kid: str
    alg: str
    private: Any

    @classmethod
    def new(cls, alg: str = "RS256") -> SigningKey:
        private = (
            ec.generate_private_key(ec.SECP256R1())
            if alg == "ES256"
            else rsa.generate_private_key(public_exponent=65537, key_size=2048)
        )
        return cls(kid=f"key-{next(_KIDS)}", alg=alg, private=private)

    def jwk(self) -> dict[str, Any]:
        algorithm = ECAlgorithm if self.alg == "ES256" else RSAAlgorithm
        jwk = algorithm.to_jwk(self.private.public_key(), as_dict=True)
        return {**jwk, "kid": self.kid, "alg": self.alg, "use": "sig"}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


class Provider:
    def __init__(self) -> None:
        self.keys = [SigningKey.new("RS256"), SigningKey.new("ES256")]
        self.current = self.keys[0]
        self.jwks_reads = 0
        self.discovery_reads = 0
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == f"{REALM}/.well-known/openid-configuration":
                    with provider._lock:
                        provider.discovery_reads += 1
                    self._json(200, provider.discovery())
                elif self.path == f"{REALM}/keys":
                    with provider._lock:
                        provider.jwks_reads += 1
                        keys = [k.jwk() for k in provider.keys]
                    self._json(200, {"keys": keys})
                else:
                    self._json(404, {"error": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = parse_qs(self.rfile.read(length).decode())
                if self.path != f"{REALM}/token":
                    self._json(404, {"error": "not_found"})
                    return
                if form.get("grant_type") != ["client_credentials"] or not form.get("sub"):
                    self._json(400, {"error": "invalid_request"})
                    return
                token = provider.token(
                    form["sub"][0],
                    audience=form.get("audience", [""])[0],
                    scope=form.get("scope", [""])[0],
                )
                self._json(200, {"access_token": token, "token_type": "Bearer", "expires_in": 300})

            def _json(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{REALM}"

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "jwks_uri": f"{self.issuer}/keys",
            "token_endpoint": f"{self.issuer}/token",
            "authorization_endpoint": f"{self.issuer}/auth",
            "grant_types_supported": ["client_credentials", "authorization_code"],
            "id_token_signing_alg_values_supported": ["RS256", "ES256"],
        }

    def token(
        self,
        user: str,
        *,
        audience: str,
        scope: str = "",
        key: SigningKey | None = None,
        alg: str | None = None,
        header: dict[str, Any] | None = None,
        **claims: Any,
    ) -> str:
        """A token for `user` (its `sub`), signed with `key` (the current one, or this
        provider's key of `alg`); `claims` override or add (None removes one)."""
        if key is None:
            key = self.current if alg is None else next(k for k in self.keys if k.alg == alg)
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": self.issuer,
            "sub": user,
            "aud": audience,
            "iat": now,
            "nbf": now,
            "exp": now + 300,
        }
        if scope:
            payload["scope"] = scope
        payload.update(claims)
        payload = {k: v for k, v in payload.items() if v is not None}
        return jwt.encode(
            payload, key.private, algorithm=key.alg, headers={"kid": key.kid, **(header or {})}
        )

    def rotate(self, *, keep_old: bool = True) -> SigningKey:
        """A new RS256 key signs from now on; the old one stays in the set unless not kept."""
        new = SigningKey.new("RS256")
        with self._lock:
            self.keys = [*(self.keys if keep_old else []), new]
            self.current = new
        return new

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def unsigned(payload: dict[str, Any]) -> str:
    """An `alg: none` token."""
    return jwt.encode(payload, None, algorithm="none")


def hmac_signed_with(secret: bytes, payload: dict[str, Any], kid: str) -> str:
    """An HS256 token keyed with `secret` (the public key's PEM, in the attack this stands
    for), made by hand: PyJWT refuses to key HMAC with a PEM."""

    def part(data: dict[str, Any]) -> str:
        raw = json.dumps(data, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    signing_input = f"{part({'alg': 'HS256', 'typ': 'JWT', 'kid': kid})}.{part(payload)}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"
