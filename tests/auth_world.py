"""A scripted OAuth world on ``httpx2.MockTransport``: an authorization server and a protected MCP server.

``AuthWorld.handler`` answers both hosts. The authorization server (``https://auth.test``) serves its
metadata and a token endpoint that checks the client's authentication (secret basic or post, a
``private_key_jwt`` assertion verified with the client's public key, a jwt-bearer workload token) and
issues opaque tokens. The MCP server (``https://mcp.test/mcp``) serves its protected-resource metadata and
answers JSON-RPC with JSON bodies, but only to a valid token; ``tools/call`` counts the calls that ran.
Knobs on the instance change the world between requests (revoke tokens, require a scope, lie about the
resource or the issuer). DPoP (RFC 9449): ``dpop_algs`` offers it in the metadata; a token request with a
``DPoP`` proof gets a token bound to its key (``token_type`` ``DPoP``), which the MCP server accepts only as
``Authorization: DPoP`` with a valid proof of that key (:func:`check_proof`, verified with
``cryptography``); ``as_nonce`` and ``rs_nonce`` make either server demand its nonce.

The client side, for the tests of :mod:`runner.auth`: :func:`provider` (an ``OAuthProvider`` whose requests
the world answers) and :func:`session_with` (a session over the real Streamable HTTP transport to it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qs, unquote

import httpx2
import jwt
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from runner.auth.config import AuthConfig
from runner.auth.http import AuthHttp
from runner.auth.provider import OAuthProvider
from runner.auth.tokens import TokenCache
from runner.session import Session, SessionOptions, open_session
from runner.transports.http.transport import HttpParams, open_http_transport

MCP_URL = "https://mcp.test/mcp"
ISSUER = "https://auth.test"
PRM_URL = "https://mcp.test/.well-known/oauth-protected-resource/mcp"
CHALLENGE = f'Bearer resource_metadata="{PRM_URL}"'
"""The MCP server's first 401 challenge, for tests that call ``OAuthProvider.challenged`` themselves."""


@dataclass
class Issued:
    scope: set[str]
    client_id: str | None
    refresh: str | None = None
    jkt: str | None = None  # the DPoP key's thumbprint the token is bound to


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def thumbprint(jwk: dict[str, Any]) -> str:
    """RFC 7638 for an EC key."""
    canonical = json.dumps({k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"), sort_keys=True)
    return _b64(hashlib.sha256(canonical.encode()).digest())


class ProofError(Exception):
    pass


def check_proof(
    proof: str | None, method: str, url: str, *, access_token: str | None = None, nonce: str | None = None
) -> tuple[dict[str, Any], str]:
    """A DPoP proof's claims and key thumbprint, verified as RFC 9449 section 4.3 says, with the ES256
    signature checked by ``cryptography`` itself; ``ProofError`` saying what is wrong."""
    if not proof or "," in proof:
        raise ProofError("missing or several DPoP proofs")
    head_b64, claims_b64, sig_b64 = proof.split(".")
    header = json.loads(_unb64(head_b64))
    claims = json.loads(_unb64(claims_b64))
    if header.get("typ") != "dpop+jwt" or header.get("alg") != "ES256":
        raise ProofError(f"bad header {header}")
    jwk = header["jwk"]
    if "d" in jwk or jwk.get("kty") != "EC" or jwk.get("crv") != "P-256":
        raise ProofError("bad jwk")
    public = ec.EllipticCurvePublicNumbers(
        int.from_bytes(_unb64(jwk["x"]), "big"), int.from_bytes(_unb64(jwk["y"]), "big"), ec.SECP256R1()
    ).public_key()
    raw = _unb64(sig_b64)
    signature = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    try:
        public.verify(signature, f"{head_b64}.{claims_b64}".encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        raise ProofError("the signature does not verify") from None
    if not isinstance(claims.get("jti"), str) or claims.get("htm") != method or claims.get("htu") != url:
        raise ProofError(f"jti/htm/htu wrong: {claims}")
    if abs(time.time() - claims.get("iat", 0)) > 60:
        raise ProofError("iat out of window")
    if access_token is not None:
        ath = _b64(hashlib.sha256(access_token.encode()).digest())
        if claims.get("ath") != ath:
            raise ProofError("ath wrong")
    elif "ath" in claims:
        raise ProofError("ath on a token request")
    if nonce is not None and claims.get("nonce") != nonce:
        raise ProofError("use_dpop_nonce")
    return claims, thumbprint(jwk)


@dataclass
class AuthWorld:
    clients: dict[str, str] = field(default_factory=lambda: {"ci-bot": "s3cret-value-123"})
    public_keys: dict[str, Any] = field(default_factory=dict)  # client id -> public key (private_key_jwt)
    workload_tokens: set[str] = field(default_factory=set)  # jwt-bearer assertions accepted
    resource: str = MCP_URL
    issuer_in_metadata: str = ISSUER
    token_endpoint: str = f"{ISSUER}/token"
    mcp_url: str = MCP_URL
    issuer: str = ISSUER
    single_origin: bool = False  # the loopback server: both roles on one origin, told apart by path
    challenge_scope: str | None = "mcp:read"
    call_scope: str | None = None  # tools/call needs this scope (else 403 insufficient_scope)
    always_reject: bool = False
    access: dict[str, Issued] = field(default_factory=dict)
    refresh: dict[str, Issued] = field(default_factory=dict)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    token_headers: list[httpx2.Headers] = field(default_factory=list)
    mcp_requests: list[tuple[str | None, Any]] = field(default_factory=list)
    calls_run: int = 0
    counter: int = 0
    codes: dict[str, dict[str, str]] = field(default_factory=dict)  # authorization code -> its request
    registered: list[dict[str, Any]] = field(default_factory=list)
    dpop_algs: list[str] | None = None  # dpop_signing_alg_values_supported (None: not in the metadata)
    dpop_challenge: bool = False  # the MCP server challenges with the DPoP scheme only
    as_nonce: str | None = None
    rs_nonce: str | None = None
    rs_nonce_stuck: bool = False  # the MCP server refuses even its own nonce
    proofs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (where, claims) of valid ones
    proof_errors: list[str] = field(default_factory=list)

    def revoke_access(self) -> None:
        self.access.clear()

    # -- routing ----------------------------------------------------------------------------------

    @classmethod
    def loopback(cls, origin: str) -> AuthWorld:
        """Both servers on ``origin`` (``http://127.0.0.1:PORT``), as :mod:`tests.fakes.oauth_server` serves them."""
        return cls(
            resource=f"{origin}/mcp",
            issuer_in_metadata=origin,
            token_endpoint=f"{origin}/token",
            mcp_url=f"{origin}/mcp",
            issuer=origin,
            single_origin=True,
        )

    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        is_auth = url.path in ("/.well-known/oauth-authorization-server", "/token", "/authorize", "/register")
        if (url.host == "auth.test") or (self.single_origin and is_auth):
            return self._auth(request)
        if url.host == "mcp.test" or self.single_origin:
            if url.path.startswith("/.well-known/oauth-protected-resource"):
                if url.path != "/.well-known/oauth-protected-resource/mcp":
                    return httpx2.Response(404)
                return httpx2.Response(
                    200,
                    json={
                        "resource": self.resource,
                        "authorization_servers": [self.issuer],
                        "scopes_supported": ["all"],
                    },
                )
            return self._mcp(request)
        return httpx2.Response(404)

    @property
    def prm_url(self) -> str:
        origin = self.mcp_url.rsplit("/mcp", 1)[0]
        return f"{origin}/.well-known/oauth-protected-resource/mcp"

    # -- the authorization server -----------------------------------------------------------------

    def _auth(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if path == "/.well-known/oauth-authorization-server":
            return httpx2.Response(
                200,
                json={
                    "issuer": self.issuer_in_metadata,
                    "token_endpoint": self.token_endpoint,
                    "authorization_endpoint": f"{self.issuer}/authorize",
                    "registration_endpoint": f"{self.issuer}/register",
                    "code_challenge_methods_supported": ["S256"],
                    "scopes_supported": ["mcp:read", "offline_access"],
                    "grant_types_supported": ["client_credentials", "refresh_token", "authorization_code"],
                    "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                    **({} if self.dpop_algs is None else {"dpop_signing_alg_values_supported": self.dpop_algs}),
                },
            )
        if path == "/token" and request.method == "POST":
            return self._token(request)
        if path == "/register" and request.method == "POST":
            body = json.loads(request.content)
            self.registered.append(body)
            client_id = f"dyn-{len(self.registered)}"
            return httpx2.Response(201, json={"client_id": client_id, "token_endpoint_auth_method": "none"})
        if path == "/authorize":
            query = dict(request.url.params)
            self.counter += 1
            code = f"code-{self.counter}"
            self.codes[code] = query
            target = httpx2.URL(query["redirect_uri"]).copy_merge_params(
                {"code": code, "state": query.get("state", "")}
            )
            return httpx2.Response(302, headers={"location": str(target)})
        return httpx2.Response(404)

    def _client(self, request: httpx2.Request, form: dict[str, str]) -> str | None:
        basic = request.headers.get("authorization", "")
        if basic.startswith("Basic "):
            client_id, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
            client_id, secret = unquote(client_id), unquote(secret)
            return client_id if self.clients.get(client_id) == secret else None
        if "client_assertion" in form:
            claims = jwt.decode(form["client_assertion"], options={"verify_signature": False})
            key = self.public_keys.get(claims.get("iss", ""))
            if key is None:
                return None
            try:
                jwt.decode(form["client_assertion"], key, algorithms=["ES256", "RS256"], audience=self.issuer)
            except jwt.PyJWTError:
                return None
            return str(claims["iss"])
        if "client_secret" in form:
            client_id = form.get("client_id", "")
            return client_id if self.clients.get(client_id) == form["client_secret"] else None
        return form.get("client_id")

    def _issue(self, scope: set[str], client_id: str | None, jkt: str | None = None) -> httpx2.Response:
        self.counter += 1
        access, refresh = f"access-{self.counter}-xyzzy", f"refresh-{self.counter}-plugh"
        self.access[access] = Issued(scope, client_id, refresh, jkt)
        self.refresh[refresh] = Issued(scope, client_id, jkt=jkt)
        return httpx2.Response(
            200,
            json={
                "access_token": access,
                "token_type": "DPoP" if jkt else "Bearer",
                "expires_in": 3600,
                "refresh_token": refresh,
                "scope": " ".join(sorted(scope)),
            },
        )

    def _token(self, request: httpx2.Request) -> httpx2.Response:
        form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
        self.token_requests.append(form)
        self.token_headers.append(request.headers)
        if form.get("resource") != self.mcp_url:
            return httpx2.Response(400, json={"error": "invalid_target"})
        jkt: str | None = None
        if "dpop" in request.headers:
            try:
                claims, jkt = check_proof(request.headers["dpop"], "POST", self.token_endpoint, nonce=self.as_nonce)
            except ProofError as exc:
                self.proof_errors.append(f"token: {exc}")
                if str(exc) == "use_dpop_nonce":
                    assert self.as_nonce is not None
                    return httpx2.Response(400, headers={"DPoP-Nonce": self.as_nonce}, json={"error": "use_dpop_nonce"})
                return httpx2.Response(400, json={"error": "invalid_dpop_proof"})
            self.proofs.append(("token", claims))
        scope = set(form.get("scope", "").split())
        grant = form.get("grant_type")
        if grant == "client_credentials":
            client = self._client(request, form)
            if client is None or client not in (*self.clients, *self.public_keys):
                return httpx2.Response(401, json={"error": "invalid_client"})
            return self._issue(scope, client, jkt)
        if grant == "urn:ietf:params:oauth:grant-type:jwt-bearer":
            if form.get("assertion") not in self.workload_tokens:
                return httpx2.Response(400, json={"error": "invalid_grant"})
            return self._issue(scope, None, jkt)
        if grant == "authorization_code":
            asked = self.codes.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "")
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            if (
                asked is None
                or asked.get("code_challenge") != digest
                or asked["redirect_uri"] != form.get("redirect_uri")
            ):
                return httpx2.Response(400, json={"error": "invalid_grant"})
            return self._issue(set(asked.get("scope", "").split()), asked.get("client_id"), jkt)
        if grant == "refresh_token":
            issued = self.refresh.pop(form.get("refresh_token", ""), None)
            if issued is None or issued.jkt != jkt:  # a bound refresh token needs a proof of its key
                return httpx2.Response(400, json={"error": "invalid_grant"})
            return self._issue(scope or issued.scope, issued.client_id, jkt)
        return httpx2.Response(400, json={"error": "unsupported_grant_type"})

    # -- the protected MCP server -----------------------------------------------------------------

    def _mcp(self, request: httpx2.Request) -> httpx2.Response:
        authorization = request.headers.get("authorization")
        body = json.loads(request.content) if request.content else None
        self.mcp_requests.append((authorization, body))
        scheme, _, token = (authorization or "").partition(" ")
        issued = self.access.get(token) if token else None
        if issued is not None and (scheme == "DPoP") != (issued.jkt is not None):
            issued = None  # a bound token as Bearer, or a Bearer one as DPoP
        if issued is not None and issued.jkt is not None:
            try:
                claims, jkt = check_proof(
                    request.headers.get("dpop"), request.method, self.mcp_url, access_token=token, nonce=self.rs_nonce
                )
                if jkt != issued.jkt:
                    raise ProofError("the proof's key is not the token's")
                if self.rs_nonce_stuck:
                    raise ProofError("use_dpop_nonce")
            except ProofError as exc:
                self.proof_errors.append(f"mcp: {exc}")
                if str(exc) == "use_dpop_nonce":
                    assert self.rs_nonce is not None
                    return httpx2.Response(
                        401,
                        headers={
                            "www-authenticate": f'DPoP error="use_dpop_nonce", resource_metadata="{self.prm_url}"',
                            "DPoP-Nonce": self.rs_nonce,
                        },
                    )
                return httpx2.Response(401, headers={"www-authenticate": 'DPoP error="invalid_dpop_proof"'})
            self.proofs.append(("mcp", claims))
        if issued is None or self.always_reject:
            challenge = f'{"DPoP" if self.dpop_challenge else "Bearer"} resource_metadata="{self.prm_url}"'
            if self.challenge_scope:
                challenge += f', scope="{self.challenge_scope}"'
            return httpx2.Response(401, headers={"www-authenticate": challenge})
        if request.method != "POST" or not isinstance(body, dict):
            return httpx2.Response(405)
        method = body.get("method")
        if "id" not in body:
            return httpx2.Response(202)
        if method == "tools/call" and self.call_scope and self.call_scope not in issued.scope:
            return httpx2.Response(
                403,
                headers={
                    "www-authenticate": f'Bearer error="insufficient_scope", scope="{self.call_scope}", '
                    f'resource_metadata="{self.prm_url}"'
                },
            )
        result: dict[str, Any]
        if method == "initialize":
            result = {
                "protocolVersion": body["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "protected", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            self.calls_run += 1
            result = {"content": [{"type": "text", "text": json.dumps(body["params"].get("arguments"))}]}
        else:
            return httpx2.Response(
                200, json={"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32601, "message": "no"}}
            )
        return httpx2.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": result})


# -- the client side ------------------------------------------------------------------------------


@runtime_checkable
class Served(Protocol):
    """What answers a provider's and a session's requests: an :class:`AuthWorld`, or a fake in front of one."""

    async def handler(self, request: httpx2.Request) -> httpx2.Response: ...


Handler = Callable[[httpx2.Request], Awaitable[httpx2.Response]]


def _handler(served: Served | Handler) -> Handler:
    return served.handler if isinstance(served, Served) else served


def provider(
    served: Served | Handler,
    config: AuthConfig,
    secrets: list[str] | None = None,
    *,
    cache: TokenCache | None = None,
    **options: Any,
) -> OAuthProvider:
    """An ``OAuthProvider`` for :data:`MCP_URL` whose HTTP requests ``served`` (or a handler) answers, with a
    token cache of its own unless given; every secret it is handed is appended to ``secrets``. ``options`` go
    to the provider."""
    return OAuthProvider(
        MCP_URL,
        config,
        http=AuthHttp(transport=httpx2.MockTransport(_handler(served))),
        cache=TokenCache() if cache is None else cache,
        on_secret=(secrets if secrets is not None else []).append,
        **options,
    )


@asynccontextmanager
async def session_with(served: Served | Handler, auth: OAuthProvider) -> AsyncIterator[Session]:
    """A session to :data:`MCP_URL` over the Streamable HTTP transport (no GET stream), authorized by ``auth``."""
    params = HttpParams(MCP_URL, auth=auth, open_get_stream=False)
    async with (
        httpx2.AsyncClient(transport=httpx2.MockTransport(_handler(served))) as client,
        open_http_transport(params, client=client) as transport,
        open_session(transport, SessionOptions(server_log_level=None)) as session,
    ):
        yield session
