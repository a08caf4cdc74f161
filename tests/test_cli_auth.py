"""The ``--auth`` flags of ``mcp-run tools`` and ``mcp-run call`` (:mod:`runner.cli.auth`): what configuration
they describe, and the usage errors for flags that make no sense together."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.auth.config import AuthConfig
from runner.cli import build_parser, main
from runner.cli.auth import auth_for
from runner.errors import UsageError
from runner.masking import Masker
from tests.auth_world import CHALLENGE, MCP_URL, AuthWorld, provider

CLIENT = ["--auth", "client_credentials", "--client-id", "ci-bot", "--client-secret", "$CLIENT_SECRET"]


@pytest.fixture(autouse=True)
def no_stored_login(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_RUN_TOKEN_STORE", str(tmp_path / "tokens.json"))
    monkeypatch.setenv("CLIENT_SECRET", "s3cret-value-123")


def config_of(*flags: str, command: str = "call") -> AuthConfig | None:
    tool = ["--tool", "echo"] if command == "call" else []
    args = build_parser().parse_args([command, *flags, *tool, MCP_URL])
    return auth_for(args, MCP_URL, Masker())


@pytest.mark.parametrize(("flags", "dpop"), [([], None), (["--dpop"], True), (["--no-dpop"], False)])
@pytest.mark.parametrize("command", ["call", "tools"])
def test_dpop_flags_set_the_configuration(command: str, flags: list[str], dpop: bool | None) -> None:
    config = config_of(*CLIENT, *flags, command=command)
    assert config is not None and config.dpop is dpop


async def test_dpop_forces_bound_tokens_where_the_server_does_not_offer_them() -> None:
    world = AuthWorld()  # its metadata names no DPoP algorithms: without the flag, Bearer tokens
    found = []
    for flags in ([], ["--dpop"]):
        config = config_of(*CLIENT, *flags)
        assert config is not None
        auth = provider(world, config)
        await auth.challenged(401, CHALLENGE, {})
        found.append((auth.header() or "").split()[0])
    assert found == ["Bearer", "DPoP"]


def test_dpop_without_oauth_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--dpop and --no-dpop need --auth GRANT"):
        config_of("--no-dpop")


def test_dpop_for_a_stdio_server_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["call", "--tool", "echo", "--dpop", "--", "some-server"]) == 2
    assert "--auth and its credentials apply to HTTP servers only" in capsys.readouterr().err
