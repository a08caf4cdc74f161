"""Discovery without I/O: the challenge, the metadata locations, the resource and issuer checks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.auth import discovery
from runner.auth.errors import AuthFailed


def test_parse_challenge_reads_quoted_and_bare_params() -> None:
    c = discovery.parse_challenge(
        'Bearer error="insufficient_scope", scope="a b", resource_metadata="https://x/.well-known/o?q=\\"1\\""'
    )
    assert c.error == "insufficient_scope"
    assert c.scope == "a b"
    assert c.resource_metadata == 'https://x/.well-known/o?q="1"'
    assert discovery.parse_challenge("bearer scope=read").scope == "read"


def test_parse_challenge_ignores_other_schemes() -> None:
    assert discovery.parse_challenge('Basic realm="x"') == discovery.Challenge()
    c = discovery.parse_challenge('Basic realm="x", Bearer scope="s"')
    assert c.scope == "s"
    assert discovery.parse_challenge(None) == discovery.Challenge()


@given(st.text())
def test_parse_challenge_never_raises(header: str) -> None:
    discovery.parse_challenge(header)
    discovery.parse_challenge("Bearer " + header)


def test_resource_metadata_urls_in_order() -> None:
    assert discovery.resource_metadata_urls("https://h.test/a/mcp", "https://h.test/meta") == [
        "https://h.test/meta",
        "https://h.test/.well-known/oauth-protected-resource/a/mcp",
        "https://h.test/.well-known/oauth-protected-resource",
    ]
    assert discovery.resource_metadata_urls("https://h.test/", None) == [
        "https://h.test/.well-known/oauth-protected-resource"
    ]


def test_server_metadata_urls_with_and_without_a_path() -> None:
    assert discovery.server_metadata_urls("https://as.test") == [
        "https://as.test/.well-known/oauth-authorization-server",
        "https://as.test/.well-known/openid-configuration",
    ]
    assert discovery.server_metadata_urls("https://as.test/tenant1") == [
        "https://as.test/.well-known/oauth-authorization-server/tenant1",
        "https://as.test/.well-known/openid-configuration/tenant1",
        "https://as.test/tenant1/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize(
    ("resource", "ok"),
    [
        ("https://h.test/mcp", True),
        ("https://H.test/mcp/", True),
        ("https://h.test", True),
        ("https://h.test/other", False),
        ("https://h.test/mc", False),
        ("http://h.test/mcp", False),
        ("https://evil.test/mcp", False),
    ],
)
def test_check_resource(resource: str, ok: bool) -> None:
    if ok:
        discovery.check_resource(resource, "https://h.test/mcp")
    else:
        with pytest.raises(AuthFailed):
            discovery.check_resource(resource, "https://h.test/mcp")


def test_check_issuer_is_exact() -> None:
    discovery.check_issuer({"issuer": "https://as.test"}, "https://as.test")
    with pytest.raises(AuthFailed):
        discovery.check_issuer({"issuer": "https://as.test/"}, "https://as.test")


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://as.test/token", True),
        ("http://127.0.0.1:9/token", True),
        ("http://localhost:9/token", True),
        ("http://[::1]:9/token", True),
        ("http://as.test/token", False),
        ("ftp://as.test/token", False),
        (None, False),
    ],
)
def test_check_endpoint(url: str | None, ok: bool) -> None:
    if ok:
        assert discovery.check_endpoint(url, "token endpoint") == url
    else:
        with pytest.raises(AuthFailed):
            discovery.check_endpoint(url, "token endpoint")


def test_choose_scope_order() -> None:
    assert discovery.choose_scope(["x"], "a b", ["s"]) == "x"
    assert discovery.choose_scope([], "a b", ["s"]) == "a b"
    assert discovery.choose_scope([], None, ["s", 3]) == "s"
    assert discovery.choose_scope([], None, None) is None
    assert discovery.choose_scope([], "a", None, extra=["a", "b"]) == "a b"
