"""``OAuthProvider``: the auth hook of one HTTP server (see :mod:`runner.transports.http.authhook`).

On the first 401 it discovers (:mod:`.discovery`): the protected-resource metadata, the authorization
server and its metadata. Then it obtains a token by the configured grant, with ``resource`` (RFC 8707) and
``scope``, and the transport sends the request again. Later:

- a 401 to a token refreshes it once (with its refresh token, else by the grant again); a token just
  obtained that is refused at once is not renewed again: ``AuthFailed``;
- a 403 ``insufficient_scope`` asks for a token with the challenge's scope added, at most
  ``step_up_limit`` times;
- tokens are cached per issuer, client (with the subject it asks for, and the DPoP key a token is bound to)
  and resource for the process (:mod:`.tokens`), so the sessions of a run share them; concurrent 401s wait
  for one renewal (a lock) and re-send with its token.

DPoP (RFC 9449, SEP-1932, :mod:`.dpop`): when the authorization server offers it (or ``auth: dpop``
says so), every token request carries a proof of the run's key and the token issued is bound to it; each
request to the server then carries ``Authorization: DPoP <token>`` and a fresh proof with the token's hash.
A server that wants a nonce refuses with ``use_dpop_nonce`` and a ``DPoP-Nonce``: the latest nonce of each
server is kept, the authorization server's and the resource's apart, and the refused request is sent once
more with it.

Every secret obtained or sent (tokens, assertions) is handed to ``on_secret`` (the run's masker). The DPoP
key never leaves memory; a proof is not a secret worth masking (it names one method and URL, is bound to
the token's hash and expires within minutes), and masking one per request would grow the masker forever.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import trio

from runner.auth import discovery, dpop
from runner.auth.clientauth import apply_client_auth
from runner.auth.config import AuthConfig, AuthMethod
from runner.auth.errors import AuthFailed, LoginRequired
from runner.auth.http import AuthHttp
from runner.auth.store import StoredLogin, TokenStore
from runner.auth.tokens import SHARED_CACHE, Token, TokenCache, parse_token_response, token_error

__all__ = ["JWT_BEARER", "Authorizer", "OAuthProvider"]

JWT_BEARER: Final = "urn:ietf:params:oauth:grant-type:jwt-bearer"
_JUST_ISSUED: Final = 60.0
"""A token refused within this many seconds of being obtained in answer to a refusal is not renewed again."""

Authorizer = Callable[["OAuthProvider", Mapping[str, Any], str | None], Awaitable[Token]]
"""Runs the authorization-code flow (:mod:`.authcode`): given the provider, the server metadata and the
scope, returns a token."""


class OAuthProvider:
    """OAuth for the server at ``server_url``; see the module docstring."""

    def __init__(
        self,
        server_url: str,
        config: AuthConfig,
        *,
        http: AuthHttp | None = None,
        cache: TokenCache = SHARED_CACHE,
        on_secret: Callable[[str], None] | None = None,
        authorizer: Authorizer | None = None,
        store: TokenStore | None = None,
        environ: Mapping[str, str] | None = None,
        proof_key: Callable[[], dpop.ProofKey] = dpop.run_key,
    ) -> None:
        self.server_url = server_url
        self.config = config
        self.http = http or AuthHttp()
        self._cache = cache
        self._on_secret = on_secret
        self._authorizer = authorizer
        self.store = store
        self._environ = os.environ if environ is None else environ
        self._lock = trio.Lock()
        self._token: Token | None = None
        self._obtained_at = -_JUST_ISSUED
        self._answering_refusal = False
        self._step_ups = 0
        self._extra_scopes: list[str] = []
        self._challenge_scope: str | None = None
        self._metadata_url: str | None = None
        self.resource: str = discovery.canonical_resource(server_url)
        self.resource_metadata: Mapping[str, Any] | None = None
        self.issuer: str | None = None
        self.server_metadata: Mapping[str, Any] | None = None
        self.client_id: str | None = config.client_id
        self.client_secret: str | None = config.client_secret  # or one issued by dynamic registration
        self.registered_method: AuthMethod | None = None  # what dynamic registration agreed on
        self.registered_with: str | None = None  # the issuer that registered the client (dynamic, or CIMD)
        self._proof_key = proof_key  # called when DPoP is first wanted (it imports cryptography)
        self.dpop: dpop.ProofKey | None = None  # the key proofs are signed with, once DPoP is chosen
        self.nonces = dpop.Nonces()
        self._challenged_dpop = False  # the server's first challenge named the DPoP scheme only

    def __repr__(self) -> str:
        return f"OAuthProvider({self.server_url!r}, grant={self.config.grant!r})"

    # -- the AuthHook interface ----------------------------------------------------------------------

    def header(self) -> str | None:
        """The ``Authorization`` value of the token held (``Bearer ...`` or ``DPoP ...``)."""
        return self._token.header() if self._token is not None else None

    def headers(self, method: str) -> dict[str, str]:
        token = self._token
        if token is None:
            return {}
        found = {"Authorization": token.header()}
        if token.bound:
            key = self._key()
            nonce = self.nonces.get("resource", self.server_url)
            found["DPoP"] = key.proof(method, self.server_url, access_token=token.access_token, nonce=nonce)
        return found

    def nonce(self, dpop_nonce: str) -> None:
        self.nonces.take("resource", self.server_url, dpop_nonce)

    async def challenged(
        self, status: int, www_authenticate: str | None, sent: Mapping[str, str], dpop_nonce: str | None = None
    ) -> bool:
        async with self._lock:
            self.nonces.take("resource", self.server_url, dpop_nonce)
            bound = self._token is not None and self._token.bound
            challenge = discovery.parse_challenge(www_authenticate, prefer="dpop" if bound else "bearer")
            if challenge.error == "use_dpop_nonce" and "DPoP" in sent:
                # RFC 9449 section 9: the server wants a proof with its nonce. It refused before running
                # the request (a 401, "not delivered" in the table of runner.transports.http.classify), so
                # sending it again is not a second call. Once per nonce: a server that refuses the nonce it
                # gave last gets no other try.
                latest = self.nonces.get("resource", self.server_url)
                if latest is None:
                    raise AuthFailed(f"{self._where()}: the server asks for a DPoP nonce but gives none (401)")
                if latest == dpop.proof_nonce(sent["DPoP"]):
                    raise AuthFailed(f"{self._where()}: the server refuses the DPoP nonce it gave (401)")
                return True
            if self.header() is not None and self.header() != sent.get("Authorization"):
                return True  # renewed meanwhile for another request
            if self.server_metadata is None and challenge.scheme == "dpop":
                self._challenged_dpop = True
            if status == 403:
                return await self._step_up(challenge)  # adds the challenge's scope to the ones held
            if challenge.scope:
                self._challenge_scope = challenge.scope
            refused = self._token if sent is not None else None
            token, answering_refusal = await self._next_token(challenge, refused)
            self._take(token, answering_refusal=answering_refusal)
            return True

    async def _next_token(self, challenge: discovery.Challenge, refused: Token | None) -> tuple[Token, bool]:
        """The token to hold after a 401, and whether it answers a refused one."""
        before = self.issuer
        # A refused token: read the resource's metadata again, it may have moved to another authorization
        # server (SEP-2352), whose token is then asked for (with a new registration, see _discover).
        await self._discover(challenge, again=refused is not None)
        if refused is None:
            cached = self._cached()
            return (cached if cached is not None else await self._grant()), False
        if before is not None and self.issuer != before:
            return await self._grant(), False
        renewed = await self._renewed(refused)
        return (renewed if renewed is not None else await self._grant()), True

    async def _renewed(self, refused: Token) -> Token | None:
        """A refreshed token for the refused one (None: a new grant is needed). A refusal of the token just
        issued in answer to a refusal fails: another grant would loop."""
        if self._answering_refusal and time.monotonic() - self._obtained_at < _JUST_ISSUED:
            raise AuthFailed(f"{self._where()}: the server refuses the token just issued (401)")
        return await self._refresh(refused) if refused.refresh_token else None

    def _cached(self) -> Token | None:
        """The cached token for this issuer, client and resource while it is fresh."""
        cached = self._cache.get(self._issuer(), self._client_key(), self.resource)
        return cached if cached is not None and cached.fresh() else None

    async def _step_up(self, challenge: discovery.Challenge) -> bool:
        if challenge.error != "insufficient_scope":
            return False  # a 403 for another reason: no token helps
        if self._step_ups >= self.config.step_up_limit:
            raise AuthFailed(
                f"{self._where()}: still insufficient_scope after {self._step_ups} wider tokens; giving up"
            )
        self._step_ups += 1
        for scope in (challenge.scope or "").split():
            if scope not in self._extra_scopes:
                self._extra_scopes.append(scope)
        await self._discover(challenge)
        self._take(await self._grant(), answering_refusal=False)
        return True

    # -- discovery -----------------------------------------------------------------------------------

    def _where(self) -> str:
        parts = urlsplit(self.server_url)
        return f"{parts.scheme}://{parts.netloc}{parts.path}"

    def _issuer(self) -> str:
        assert self.issuer is not None
        return self.issuer

    def _client_key(self) -> str:
        """The cache's name for whom a token is for: the client, the subject it asks for (one client, many
        users or workloads: :meth:`AuthConfig.subject_key`), and the DPoP key a token is bound to (a token
        bound to one key is no use without it, and a server configured ``dpop: false`` takes no bound one)."""
        key = self.client_id or self.config.client_metadata_url or "(dynamic)"
        key += self.config.subject_key()
        if self.dpop is not None:
            key += f"#dpop:{self.dpop.thumbprint}"
        return key

    async def _discover(self, challenge: discovery.Challenge, *, again: bool = False) -> None:
        """Find the authorization server and its metadata (once; again when a challenge names new metadata, or
        with ``again``)."""
        if (
            not again
            and self.server_metadata is not None
            and (challenge.resource_metadata is None or challenge.resource_metadata == self._metadata_url)
        ):
            return
        prm = await self._read_resource_metadata(challenge)
        self.resource_metadata = prm
        issuer = self._choose_issuer(prm)
        discovery.check_endpoint(issuer, "issuer")
        issuer, metadata = await self._read_server_metadata(issuer, prm)
        if self.registered_with is not None and issuer != self.registered_with:
            # The resource moved to another authorization server (SEP-2352): a client registered with the old
            # one means nothing to the new one, and its credentials must not be shown to it.
            self.client_id, self.client_secret, self.registered_method = None, None, None
            self.registered_with = None
        self.issuer = issuer
        self.server_metadata = metadata
        if dpop.wanted(self.config.dpop, metadata, challenged_dpop=self._challenged_dpop):
            self._key()
        else:
            self.dpop = None

    def _key(self) -> dpop.ProofKey:
        """The run's DPoP key (made on first use)."""
        if self.dpop is None:
            self.dpop = self._proof_key()
        return self.dpop

    async def _read_resource_metadata(self, challenge: discovery.Challenge) -> Mapping[str, Any] | None:
        """The protected-resource metadata (the first URL that answers an object; None when none does)."""
        for url in discovery.resource_metadata_urls(self.server_url, challenge.resource_metadata):
            data = await self.http.get_json(url)
            if isinstance(data, Mapping):
                self._metadata_url = url
                return data
        return None

    def _choose_issuer(self, prm: Mapping[str, Any] | None) -> str:
        """The authorization server to use: the configured one, else the resource metadata's first, else (no
        resource metadata, MCP 2025-03-26) the server's origin. Takes the metadata's ``resource`` on the way."""
        if prm is None:
            parts = urlsplit(self.server_url)
            return self.config.issuer or f"{parts.scheme}://{parts.netloc}"
        resource = prm.get("resource")
        if isinstance(resource, str) and resource:
            discovery.check_resource(resource, self.server_url)
            self.resource = resource
        servers = [s for s in prm.get("authorization_servers") or [] if isinstance(s, str)]
        if self.config.issuer is not None:
            return self.config.issuer
        if servers:
            return servers[0]
        raise AuthFailed(f"{self._where()}: the protected-resource metadata names no authorization server")

    async def _read_server_metadata(self, issuer: str, prm: Mapping[str, Any] | None) -> tuple[str, Mapping[str, Any]]:
        """The issuer (MCP 2025-03-26: as its metadata names it) and its authorization server metadata."""
        for url in discovery.server_metadata_urls(issuer):
            data = await self.http.get_json(url)
            if not isinstance(data, Mapping):
                continue
            if prm is not None:
                discovery.check_issuer(data, issuer)
            elif isinstance(data.get("issuer"), str):
                issuer = data["issuer"]  # MCP 2025-03-26: the server's origin stands for its issuer
            return issuer, data
        if prm is not None:
            raise AuthFailed(f"no authorization server metadata found for {issuer}")
        # MCP 2025-03-26: no metadata at all; the default endpoints at the server's origin.
        base = issuer.rstrip("/")
        defaults = {
            "issuer": issuer,
            "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token",
            "registration_endpoint": f"{base}/register",
        }
        return issuer, defaults

    def scope(self, *, interactive: bool = False) -> str | None:
        """The scope to ask for; ``offline_access`` added to an interactive login the server offers it to."""
        supported = self.resource_metadata.get("scopes_supported") if self.resource_metadata else None
        extra = list(self._extra_scopes)
        as_supported = (self.server_metadata or {}).get("scopes_supported")
        if interactive and isinstance(as_supported, list) and "offline_access" in as_supported:
            extra.append("offline_access")
        return discovery.choose_scope(self.config.scopes, self._challenge_scope, supported, extra=extra)

    # -- tokens --------------------------------------------------------------------------------------

    def _take(self, token: Token, *, answering_refusal: bool) -> None:
        self._token = token
        self._obtained_at = time.monotonic()
        self._answering_refusal = answering_refusal
        self.secret(token.access_token)
        if token.refresh_token:
            self.secret(token.refresh_token)
        self._cache.put(self._issuer(), self._client_key(), self.resource, token)
        self._remember(token)

    def secret(self, value: str) -> None:
        if self._on_secret is not None and value:
            self._on_secret(value)

    def auth_method(self) -> AuthMethod:
        """The client authentication to use: the configured one, else by what is held and offered."""
        if self.config.auth_method is not None:
            return self.config.auth_method
        if self.registered_method is not None:
            return self.registered_method
        if self.config.private_key:
            return "private_key_jwt"
        if self.config.client_secret or self.client_secret:
            offered = (self.server_metadata or {}).get("token_endpoint_auth_methods_supported")
            if isinstance(offered, list) and "client_secret_basic" not in offered and "client_secret_post" in offered:
                return "client_secret_post"
            return "client_secret_basic"
        return "none"

    async def token_request(self, form: dict[str, str], *, authenticate: bool = True) -> Token:
        """POST ``form`` to the token endpoint with the client's authentication and ``resource``."""
        metadata = self.server_metadata or {}
        endpoint = discovery.check_endpoint(metadata.get("token_endpoint"), "token endpoint")
        form.setdefault("resource", self.resource)
        key = self.dpop
        for attempt in range(2):
            headers = {"Accept": "application/json"}
            if authenticate and self.client_id is not None:
                for value in apply_client_auth(  # again on a retry: an assertion is used once
                    self.auth_method(),
                    self.config,
                    self.client_id,
                    self._issuer(),
                    form,
                    headers,
                    client_secret=self.client_secret,
                ):
                    self.secret(value)
            nonce = self.nonces.get("authorization", endpoint)
            if key is not None:
                headers["DPoP"] = key.proof("POST", endpoint, nonce=nonce)
            answer = await self.http.exchange(endpoint, form=form, headers=headers)
            self.nonces.take("authorization", endpoint, answer.headers.get("dpop-nonce"))
            if answer.status == 200:
                return parse_token_response(
                    answer.data, previous_refresh=form.get("refresh_token"), dpop=key is not None
                )
            # RFC 9449 section 8: the authorization server wants its nonce in the proof; once per nonce.
            latest = self.nonces.get("authorization", endpoint)
            asked_nonce = isinstance(answer.data, Mapping) and answer.data.get("error") == "use_dpop_nonce"
            if not (key is not None and attempt == 0 and asked_nonce and latest is not None and latest != nonce):
                break
        raise AuthFailed(f"the token endpoint refused ({answer.status}, {token_error(answer.data)})")

    async def _refresh(self, token: Token) -> Token | None:
        """A new token from ``token``'s refresh token, or ``None`` when the server refuses it."""
        assert token.refresh_token is not None
        form = {"grant_type": "refresh_token", "refresh_token": token.refresh_token}
        scope = self.scope()
        if scope:
            form["scope"] = scope
        try:
            return await self.token_request(form)
        except AuthFailed:
            return None

    async def _grant(self) -> Token:
        grant = self.config.grant
        scope = self.scope(interactive=grant == "authorization_code")
        if grant == "client_credentials":
            if self.client_id is None:
                raise AuthFailed("the client_credentials grant needs a client id (auth: client_id)")
            form = {"grant_type": "client_credentials"}
        elif grant == "jwt_bearer":
            assertion = await self._workload_token()
            self.secret(assertion)
            form = {"grant_type": JWT_BEARER, "assertion": assertion}
        elif grant == "enterprise":
            form = {"grant_type": JWT_BEARER, "assertion": await self._id_jag(scope)}
        elif grant == "login":
            return await self._stored_login()
        else:
            if self._authorizer is None:
                raise AuthFailed("the authorization-code flow needs a person: run mcp-run login first")
            return await self._authorizer(self, self.server_metadata or {}, scope)
        if scope:
            form["scope"] = scope
        return await self.token_request(form)

    async def _stored_login(self) -> Token:
        """A token from the refresh token ``mcp-run login`` stored for this server."""
        if self.store is None:
            raise LoginRequired(self.server_url, "no token store")
        login = self.store.find(self.server_url, self.issuer)
        if login is None:
            raise LoginRequired(self.server_url, f"no stored login for {self._where()}")
        self.secret(login.refresh_token)
        if login.client_secret:
            self.secret(login.client_secret)
        self.client_id, self.client_secret = login.client_id, login.client_secret
        token = await self._refresh(Token("", refresh_token=login.refresh_token))
        if token is None:
            raise LoginRequired(
                self.server_url, f"the stored login for {self._where()} was refused (expired or revoked)"
            )
        return token

    def _remember(self, token: Token) -> None:
        """Keep a login's (rotated) refresh token in the store."""
        if self.store is None or token.refresh_token is None or self.client_id is None:
            return
        if self.config.grant not in ("login", "authorization_code"):
            return
        login = self.store.find(self.server_url, self.issuer)
        if login is not None and login.refresh_token == token.refresh_token:
            return
        self.store.save(
            StoredLogin(
                self.server_url, self._issuer(), self.client_id, token.refresh_token, self.client_secret, token.scope
            )
        )

    async def _id_jag(self, scope: str | None) -> str:
        """The enterprise grant's assertion: an ID-JAG from the IdP for this issuer and resource (SEP-990)."""
        from runner.auth.enterprise import request_id_jag

        if self.client_id is None:
            raise AuthFailed("the enterprise grant needs the client id registered with the authorization server")
        return await request_id_jag(
            self.http, self.config, audience=self._issuer(), resource=self.resource, scope=scope, on_secret=self.secret
        )

    async def _workload_token(self) -> str:
        """The jwt-bearer grant's assertion: configured, or from GitHub Actions' OIDC endpoint."""
        if self.config.assertion:
            return self.config.assertion
        audience = self.config.github_audience
        if audience is None:
            raise AuthFailed("the jwt_bearer grant needs a workload token (auth: assertion) or github_audience")
        url = self._environ.get("ACTIONS_ID_TOKEN_REQUEST_URL")
        request_token = self._environ.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
        if not url or not request_token:
            raise AuthFailed(
                "GitHub Actions' OIDC endpoint is not available (the job needs `permissions: id-token: write`)"
            )
        separator = "&" if "?" in url else "?"
        from urllib.parse import quote

        data = await self.http.get_json(
            f"{url}{separator}audience={quote(audience, safe='')}",
            headers={"Authorization": f"Bearer {request_token}"},
        )
        value = data.get("value") if isinstance(data, Mapping) else None
        if not isinstance(value, str) or not value:
            raise AuthFailed("GitHub Actions' OIDC endpoint gave no token")
        return value
