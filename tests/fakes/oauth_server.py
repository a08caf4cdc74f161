"""A protected MCP server and its authorization server on one loopback port, for end-to-end tests.

``python tests/fakes/oauth_server.py`` binds ``127.0.0.1:0``, prints ``http://127.0.0.1:PORT`` on stdout
and serves :class:`tests.auth_world.AuthWorld` (an authorization server issuing tokens to the client
``ci-bot`` with secret ``$OAUTH_TEST_SECRET``, and an MCP server at ``/mcp`` answering only to its tokens)
over uvicorn until killed. ``POST /idp/token`` plays an enterprise IdP (SEP-990): a token exchange of the ID
token ``$OAUTH_TEST_ID_TOKEN`` answers an ID-JAG that the authorization server then takes as a jwt-bearer
assertion; any other ID token is refused (``invalid_grant``). Every token it issued (ID-JAGs too) is
appended to ``$OAUTH_TEST_TOKENS`` (a file) when set, so a test can look for them where they must not be.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx2
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.auth_world import AuthWorld


def _append(path: str, lines: list[str]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.writelines(f"{line}\n" for line in lines)


def make_app(world: AuthWorld, tokens_file: str | None) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        query = scope.get("query_string", b"").decode()
        host = dict(headers).get("host", "127.0.0.1")
        url = f"http://{host}{scope['path']}" + (f"?{query}" if query else "")
        request = httpx2.Request(scope["method"], url, headers=headers, content=body)
        before = set(world.access) | set(world.refresh) | world.workload_tokens
        if scope["path"] == "/idp/token":
            response = _idp_token(world, request)
        else:
            response = await world.handler(request)
        issued = (set(world.access) | set(world.refresh) | world.workload_tokens) - before
        if tokens_file and issued:
            _append(tokens_file, sorted(issued))
        content = response.content
        out_headers = [(k.encode(), v.encode()) for k, v in response.headers.items() if k.lower() != "content-length"]
        out_headers.append((b"content-length", str(len(content)).encode()))
        await send({"type": "http.response.start", "status": response.status_code, "headers": out_headers})
        await send({"type": "http.response.body", "body": content})

    return app


def _idp_token(world: AuthWorld, request: httpx2.Request) -> httpx2.Response:
    """The enterprise IdP's token exchange: the expected ID token for an ID-JAG, anything else refused."""
    form = {k: v[0] for k, v in parse_qs(request.content.decode()).items()}
    expected = os.environ.get("OAUTH_TEST_ID_TOKEN")
    if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange":
        return httpx2.Response(400, json={"error": "unsupported_grant_type"})
    if not expected or form.get("subject_token") != expected:
        return httpx2.Response(400, json={"error": "invalid_grant", "error_description": "the ID token has expired"})
    world.counter += 1
    jag = f"id-jag-{world.counter}-quux"
    world.workload_tokens.add(jag)
    return httpx2.Response(
        200,
        json={"access_token": jag, "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag", "token_type": "N_A"},
    )


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    origin = f"http://127.0.0.1:{sock.getsockname()[1]}"
    world = AuthWorld.loopback(origin)
    world.clients = {"ci-bot": os.environ.get("OAUTH_TEST_SECRET", "loopback-secret")}
    config = uvicorn.Config(make_app(world, os.environ.get("OAUTH_TEST_TOKENS")), log_level="warning", lifespan="off")
    print(origin, flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
