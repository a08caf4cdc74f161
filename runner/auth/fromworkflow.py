"""From a workflow's ``auth:`` block (:class:`runner.workflow.auth.ServerAuth`) to an :class:`AuthConfig`,
its secret references resolved (``$NAME``, ``file:PATH``)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from runner.auth.config import AuthConfig, resolve_secret
from runner.auth.errors import AuthFailed
from runner.workflow.auth import ServerAuth

__all__ = ["auth_config", "auth_secrets"]

_SECRETS = ("client_secret", "private_key", "assertion", "id_token", "idp_client_secret")


def auth_secrets(auth: ServerAuth, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """field -> value of the secrets ``auth`` refers to that can be read now (to mask them)."""
    found: dict[str, str] = {}
    for key in _SECRETS:
        reference = getattr(auth, key)
        if reference is not None:
            with contextlib.suppress(AuthFailed):
                found[key] = resolve_secret(reference, environ)
    return found


def auth_config(auth: ServerAuth, environ: Mapping[str, str] | None = None) -> AuthConfig:
    """The configuration ``auth`` describes; ``AuthFailed`` naming a reference that cannot be read."""

    def read(reference: str | None) -> str | None:
        return resolve_secret(reference, environ) if reference is not None else None

    return AuthConfig(
        grant=auth.grant,
        client_id=auth.client_id,
        auth_method=auth.auth_method,
        scopes=tuple(auth.scopes or ()),
        issuer=auth.issuer,
        github_audience=auth.github_audience,
        dpop=auth.dpop,
        client_secret=read(auth.client_secret),
        private_key=read(auth.private_key),
        assertion=read(auth.assertion),
        id_token=read(auth.id_token),
        idp_token_url=auth.idp_token_url,
        idp_issuer=auth.idp_issuer,
        idp_client_id=auth.idp_client_id,
        idp_client_secret=read(auth.idp_client_secret),
    )
