"""A small conformance client on the official MCP Python SDK (mcp 2.3.0), written here to measure the SDK's
scores beside mcp-run's in the same run (scripts/conformance-scores.sh). Measuring only: CI does not use it.

The SDK ships no conformance client in its wheel, so this one does, with the SDK's public API, what each
client scenario of @modelcontextprotocol/conformance asks (the suite passes the server URL as the last
argument and sets MCP_CONFORMANCE_SCENARIO, MCP_CONFORMANCE_PROTOCOL_VERSION, MCP_CONFORMANCE_CONTEXT):
the handshake (``mode="legacy"``) or the 2026-07-28 pin, tools, SEP-1034 elicitation defaults, the schema
echo of json-schema-2020-12-preservation, the tool calls a scenario's context lists, and the OAuth flows:
authorization code with a redirect followed by hand (the suite's authorization server approves at once),
client credentials (secret or private-key JWT) from the context.

    .venv/bin/python scripts/sdk_conformance_client.py SERVER_URL
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any
from urllib.parse import parse_qs, urlparse

import anyio
import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from mcp_types import ElicitRequestParams, ElicitResult

TIMEOUT = 50.0  # scripts/conformance-scores.sh gives the suite's client a 60 s timeout


class MemoryStorage:
    def __init__(self, client: OAuthClientInformationFull | None = None) -> None:
        self.tokens: OAuthToken | None = None
        self.client = client

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def _auth(url: str, context: dict[str, Any]) -> httpx2.Auth | None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if not scenario.startswith("auth/"):
        return None
    if "private_key_pem" in context:
        params = SignedJWTParameters(
            issuer=context["client_id"],
            subject=context["client_id"],
            signing_key=context["private_key_pem"],
            signing_algorithm=context.get("signing_algorithm", "ES256"),
        )
        return PrivateKeyJWTOAuthProvider(
            server_url=url,
            storage=MemoryStorage(),
            client_id=context["client_id"],
            assertion_provider=params.create_assertion_provider(),
        )
    if "client_secret" in context and "credentials" in scenario:
        return ClientCredentialsOAuthProvider(
            server_url=url,
            storage=MemoryStorage(),
            client_id=context["client_id"],
            client_secret=context["client_secret"],
            issuer=context.get("issuer"),
        )
    redirect = "http://localhost:3000/callback"
    result: dict[str, AuthorizationCodeResult] = {}

    async def follow(authorization_url: str) -> None:
        async with httpx2.AsyncClient(follow_redirects=False) as http:
            response = await http.get(authorization_url)
        query = parse_qs(urlparse(response.headers.get("location", "")).query)
        code = query.get("code", [""])[0]
        result["code"] = AuthorizationCodeResult(
            code=code, state=query.get("state", [None])[0], iss=query.get("iss", [None])[0]
        )

    async def callback() -> AuthorizationCodeResult:
        return result["code"]

    preregistered = None
    if "client_id" in context:
        preregistered = OAuthClientInformationFull(
            client_id=context["client_id"],
            client_secret=context.get("client_secret"),
            redirect_uris=[redirect],  # type: ignore[list-item]
        )
    metadata = OAuthClientMetadata(
        client_name="sdk-conformance-client",
        redirect_uris=[redirect],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    return OAuthClientProvider(
        server_url=url,
        client_metadata=metadata,
        storage=MemoryStorage(preregistered),
        redirect_handler=follow,
        callback_handler=callback,
        client_metadata_url="https://conformance-test.local/client-metadata.json",
    )


async def _elicit(_context: Any, params: ElicitRequestParams) -> ElicitResult:
    schema = getattr(params, "requested_schema", None) or {}
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    content = {k: v["default"] for k, v in properties.items() if isinstance(v, dict) and "default" in v}
    return ElicitResult(action="accept", content=content)


async def run(url: str) -> None:
    with anyio.fail_after(TIMEOUT):
        await _scenario(url)


async def _scenario(url: str) -> None:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "2025-11-25")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    auth = _auth(url, context)
    http = httpx2.AsyncClient(auth=auth, timeout=TIMEOUT) if auth is not None else None
    mode: Any = "legacy" if version != "2026-07-28" else version
    transport = streamable_http_client(url, http_client=http)
    async with Client(transport, mode=mode, elicitation_callback=_elicit) as client:  # type: ignore[arg-type]
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        if scenario == "tools_call" or "add_numbers" in tools:
            await client.call_tool("add_numbers", {"a": 5, "b": 3})
        elif scenario == "sse-retry":
            await client.call_tool("test_reconnection", {})
        elif scenario == "elicitation-sep1034-client-defaults":
            await client.call_tool("test_client_elicitation_defaults", {})
        elif scenario == "json-schema-2020-12-preservation":
            schema = tools["json_schema_2020_12_tool"].input_schema
            await client.call_tool("json_schema_echo", {"schema": schema})
        for call in context.get("toolCalls", []):
            if call.get("name") in tools:
                await client.call_tool(call["name"], call.get("arguments") or {})
        if scenario == "http-invalid-tool-headers" and "valid_tool" in tools:
            await client.call_tool("valid_tool", {"region": "us-west1"})
        if scenario in ("sep-2322-client-request-state", "http-standard-headers"):
            for name, tool in tools.items():  # each tool once; the suite's checks judge what went over the wire
                if not (tool.input_schema or {}).get("required"):
                    try:
                        await client.call_tool(name, {})
                    except Exception as exc:
                        print(f"sdk client: {name}: {type(exc).__name__}: {exc}", file=sys.stderr)


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: sdk_conformance_client.py SERVER_URL", file=sys.stderr)
        return 2
    try:
        anyio.run(run, sys.argv[-1])
    except Exception as exc:  # a measuring script: any failure is the scenario's failure
        print(f"sdk client: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
