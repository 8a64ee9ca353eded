"""A small OpenID token issuer on loopback, for the OAUTHBEARER tests: what an identity provider
(Keycloak, Okta, Entra ID) is to a Kafka deployment, reduced to the two endpoints Kafka uses.

* ``POST /token``: the OAuth 2 client-credentials grant (client id and secret by HTTP Basic or
  in the form); answers a signed RS256 JWT whose ``sub`` is the client id - the principal the
  broker authorizes (``User:<client id>``);
* ``GET /jwks``: the public key the brokers validate tokens with.

Real clients talk to it: librdkafka's ``oidc`` method, the Java client's login callback
handler; real brokers validate with Kafka's own ``OAuthBearerValidatorCallbackHandler``.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

KEY_ID = "drkit-test-key"


class Issuer:
    """Issues tokens to ``clients`` (id -> secret) for ``audience``; counts what it issued."""

    def __init__(
        self,
        clients: Mapping[str, str],
        audience: str,
        lifetime_s: int = 3600,
        claimed_issuers: Mapping[str, str] | None = None,
    ) -> None:
        self.clients, self.audience, self.lifetime_s = dict(clients), audience, lifetime_s
        # Clients whose tokens claim another issuer (a provider that is not this one).
        self.claimed_issuers = dict(claimed_issuers or {})
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.issued: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.base_url}/jwks"

    def jwks(self) -> dict[str, Any]:
        key: dict[str, Any] = json.loads(RSAAlgorithm.to_jwk(self._key.public_key()))
        key.update({"kid": KEY_ID, "use": "sig", "alg": "RS256"})
        return {"keys": [key]}

    def token(self, client_id: str, scope: str = "") -> str:
        now = int(time.time())
        claims = {
            "iss": self.claimed_issuers.get(client_id, self.base_url),
            "sub": client_id,
            "aud": self.audience,
            "iat": now,
            "exp": now + self.lifetime_s,
            "scope": scope,
        }
        return jwt.encode(claims, self._key, algorithm="RS256", headers={"kid": KEY_ID})

    def _grant(self, headers: Mapping[str, str], body: str) -> tuple[int, dict[str, Any]]:
        form = {k: v[0] for k, v in urllib.parse.parse_qs(body).items()}
        client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        basic = headers.get("Authorization", "")
        if basic.startswith("Basic "):
            decoded = base64.b64decode(basic[len("Basic ") :]).decode()
            client_id, _, secret = decoded.partition(":")
            client_id, secret = urllib.parse.unquote(client_id), urllib.parse.unquote(secret)
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        if self.clients.get(client_id) != secret or not secret:
            self.refused[client_id] += 1
            return 401, {"error": "invalid_client"}
        self.issued[client_id] += 1
        token = self.token(client_id, form.get("scope", ""))
        return 200, {"access_token": token, "token_type": "bearer", "expires_in": self.lifetime_s}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, status: int, payload: dict[str, Any]) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path.split("?")[0] == "/jwks":
                    self._answer(200, issuer.jwks())
                else:
                    self._answer(404, {"error": "not_found"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode()
                if self.path.split("?")[0] != "/token":
                    self._answer(404, {"error": "not_found"})
                    return
                self._answer(*issuer._grant(dict(self.headers.items()), body))

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: pytest shows failures, not every request

        return Handler

    def start(self) -> Issuer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def running_issuer(
    clients: Mapping[str, str], audience: str, claimed_issuers: Mapping[str, str] | None = None
) -> Iterator[Issuer]:
    issuer = Issuer(clients, audience, claimed_issuers=claimed_issuers).start()
    try:
        yield issuer
    finally:
        issuer.stop()
