"""OAuth on the command line: the ``--auth`` flags of ``tools`` and ``call``, and ``mcp-run login`` /
``mcp-run logout``.

Secrets on the command line are references, as in a workflow: ``--client-secret '$NAME'`` (an environment
variable) or ``--client-secret file:PATH``; never the value (argv is visible to every user of the machine).
Without ``--auth``, a server for which ``mcp-run login`` stored a login uses it.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from runner.errors import UsageError
from runner.exitcodes import ExitCode

if TYPE_CHECKING:
    from runner.auth.config import AuthConfig, Grant
    from runner.masking import Masker

__all__ = ["add_auth_options", "add_commands", "auth_for"]

_REFERENCE_HELP = "a reference: '$NAME' (an environment variable) or file:PATH; never the value"


def add_auth_options(parser: argparse.ArgumentParser, *, login: bool = False) -> None:
    group = parser.add_argument_group("OAuth (HTTP servers)")
    if not login:
        group.add_argument(
            "--auth",
            choices=("client_credentials", "jwt_bearer", "enterprise", "login"),
            help="obtain tokens by this grant (default: a login stored by `mcp-run login URL`, if any)",
        )
    group.add_argument("--client-id", metavar="ID", help="the registered client's id")
    group.add_argument("--client-secret", metavar="REF", help=f"the client's secret, {_REFERENCE_HELP}")
    if not login:
        group.add_argument("--private-key", metavar="REF", help=f"a PEM key for private_key_jwt, {_REFERENCE_HELP}")
        group.add_argument("--assertion", metavar="REF", help=f"jwt_bearer: the workload token, {_REFERENCE_HELP}")
        group.add_argument(
            "--github-audience", metavar="AUD", help="jwt_bearer: get the workload token from GitHub Actions' OIDC"
        )
        _add_enterprise_options(group)
        group.add_argument(
            "--dpop",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="DPoP-bound tokens (RFC 9449), as a workflow's `auth: {dpop: true|false}`: --dpop always, "
            "--no-dpop never (default: when the authorization server offers them)",
        )
    group.add_argument("--scope", action="append", default=[], metavar="SCOPE", help="a scope to ask for; repeatable")
    group.add_argument("--issuer", metavar="URL", help="the authorization server (default: the server's first)")


def _add_enterprise_options(group: argparse._ArgumentGroup) -> None:
    """The enterprise grant's flags (SEP-990): the ID token and where the IdP exchanges it."""
    group.add_argument("--id-token", metavar="REF", help=f"enterprise: the IdP sign-in's ID token, {_REFERENCE_HELP}")
    group.add_argument("--idp-token-url", metavar="URL", help="enterprise: the IdP's token endpoint")
    group.add_argument(
        "--idp-issuer", metavar="URL", help="enterprise: the IdP's issuer (its metadata names the endpoint)"
    )
    group.add_argument("--idp-client-id", metavar="ID", help="enterprise: the client's id at the IdP")
    group.add_argument(
        "--idp-client-secret", metavar="REF", help=f"enterprise: the client's IdP secret, {_REFERENCE_HELP}"
    )


def _reference(flag: str, value: str | None) -> str | None:
    if value is None:
        return None
    from runner.workflow.auth import SECRET_REFERENCE

    if not SECRET_REFERENCE.fullmatch(value):
        raise UsageError(f"{flag} takes a reference ('$NAME' or file:PATH), not the secret itself")
    from runner.auth.config import resolve_secret
    from runner.auth.errors import AuthFailed

    try:
        return resolve_secret(value)
    except AuthFailed as exc:
        raise UsageError(f"{flag}: {exc}") from None


def auth_for(args: argparse.Namespace, url: str, masker: Masker) -> AuthConfig | None:
    """The OAuth configuration the flags describe for ``url`` (its secrets added to ``masker``), or the stored
    login's, or ``None``."""
    from runner.auth.config import AuthConfig

    given = _given_secrets(args, masker)
    grant = _grant(args, url, given)
    if grant is None:
        if args.dpop is not None:
            raise UsageError("--dpop and --no-dpop need --auth GRANT (or a login stored by `mcp-run login URL`)")
        return None
    return AuthConfig(
        grant=grant,
        client_id=args.client_id,
        scopes=tuple(args.scope),
        issuer=args.issuer,
        github_audience=args.github_audience,
        client_secret=given["client_secret"],
        private_key=given["private_key"],
        assertion=given["assertion"],
        id_token=given["id_token"],
        idp_token_url=args.idp_token_url,
        idp_issuer=args.idp_issuer,
        idp_client_id=args.idp_client_id,
        idp_client_secret=given["idp_client_secret"],
        dpop=args.dpop,
    )


def _given_secrets(args: argparse.Namespace, masker: Masker) -> dict[str, str | None]:
    """The secrets the flags refer to, resolved, each added to ``masker``."""
    given = {
        "client_secret": _reference("--client-secret", args.client_secret),
        "private_key": _reference("--private-key", args.private_key),
        "assertion": _reference("--assertion", args.assertion),
        "id_token": _reference("--id-token", args.id_token),
        "idp_client_secret": _reference("--idp-client-secret", args.idp_client_secret),
    }
    for key, value in given.items():
        if value:
            masker.add(f"auth.{key}", value)
    return given


def _grant(args: argparse.Namespace, url: str, given: dict[str, str | None]) -> Grant | None:
    """The grant ``--auth`` names, once the flags it needs are checked; without ``--auth``, ``login`` when a
    login is stored for ``url`` (else None: no OAuth)."""
    grant = getattr(args, "auth", None)
    if grant is None:
        return _stored_login(args, url, given)
    if grant == "client_credentials" and not args.client_id:
        raise UsageError("--auth client_credentials needs --client-id")
    if grant == "jwt_bearer" and not (given["assertion"] or args.github_audience):
        raise UsageError("--auth jwt_bearer needs --assertion or --github-audience")
    if grant == "enterprise":
        _check_enterprise(args, given)
    if grant not in ("client_credentials", "jwt_bearer", "enterprise", "login"):
        raise UsageError(f"--auth: unknown grant {grant!r}")
    return cast("Grant", grant)


def _check_enterprise(args: argparse.Namespace, given: dict[str, str | None]) -> None:
    if not args.client_id or not given["id_token"]:
        raise UsageError("--auth enterprise needs --client-id and --id-token")
    if not (args.idp_token_url or args.idp_issuer):
        raise UsageError("--auth enterprise needs --idp-token-url or --idp-issuer")


def _stored_login(args: argparse.Namespace, url: str, given: dict[str, str | None]) -> Grant | None:
    """Without ``--auth``: ``login`` when ``mcp-run login`` stored one for ``url``; the other flags need a grant."""
    if any(given.values()) or args.client_id:
        raise UsageError("--client-id, --client-secret, --private-key and --assertion need --auth GRANT")
    from runner.auth.store import TokenStore

    return None if TokenStore().find(url) is None else "login"


def token_sink(masker: Masker) -> Callable[[str], None]:
    from runner.secrets_of import oauth_secret_sink

    return oauth_secret_sink(masker)


# -- login and logout -------------------------------------------------------------------------------


def add_commands(sub: Any, formatter: type[argparse.HelpFormatter], exit_help: str) -> None:
    login = _url_command(
        sub,
        "login",
        run_login,
        formatter,
        help="log in to an OAuth-protected server once, for later unattended runs",
        description="Run the OAuth authorization-code flow (PKCE) for an MCP server in a browser, and store the\n"
        "refresh token in your token store (mode 0600, under your state directory), so that later runs\n"
        "and workflows (auth: {grant: login}) get tokens silently.",
        epilog="examples:\n  mcp-run login https://api.example.com/mcp\n"
        "  mcp-run login --client-id my-app --no-browser https://api.example.com/mcp\n\n" + exit_help,
    )
    add_auth_options(login, login=True)
    login.add_argument(
        "--client-metadata-url", metavar="URL", help="a client-ID metadata document to use as the client id"
    )
    login.add_argument("--no-browser", action="store_true", help="only print the URL to open")
    _url_command(
        sub,
        "logout",
        run_logout,
        formatter,
        help="forget the login stored for a server",
        description="Remove the refresh tokens `mcp-run login` stored for a server.",
    )


def _url_command(
    sub: Any,
    name: str,
    handler: Callable[[argparse.Namespace], int],
    formatter: type[argparse.HelpFormatter],
    **texts: str,
) -> argparse.ArgumentParser:
    """A subcommand about one server: its parser, taking the server's URL, run by ``handler``."""
    parser: argparse.ArgumentParser = sub.add_parser(name, formatter_class=formatter, **texts)
    parser.add_argument("url", metavar="URL", help="the MCP server's Streamable HTTP endpoint")
    parser.set_defaults(handler=handler)
    return parser


def run_login(args: argparse.Namespace) -> int:
    import trio

    from runner.auth.config import AuthConfig
    from runner.auth.store import TokenStore
    from runner.masking import Masker

    masker = Masker()
    secret = _reference("--client-secret", args.client_secret)
    if secret:
        masker.add("auth.client_secret", secret)
    config = AuthConfig(
        grant="authorization_code",
        client_id=args.client_id,
        client_secret=secret,
        scopes=tuple(args.scope),
        issuer=args.issuer,
        client_metadata_url=args.client_metadata_url,
    )
    store = TokenStore()
    stored = trio.run(_login, args.url, config, store, not args.no_browser, masker)
    if stored:
        print(f"logged in to {args.url}; the refresh token is in {store.path}", file=sys.stderr)
        return ExitCode.OK
    print(
        f"logged in to {args.url}, but the server issued no refresh token: later runs will need a new login",
        file=sys.stderr,
    )
    return ExitCode.OK


async def _login(url: str, config: AuthConfig, store: Any, open_browser: bool, masker: Masker) -> bool:
    from runner.auth.authcode import authorizer
    from runner.auth.loopback import open_loopback
    from runner.auth.provider import OAuthProvider
    from runner.connect import HttpTarget, open_target
    from runner.errors import McpRunError
    from runner.session import SessionOptions

    if config.dpop is None:
        # No DPoP proof at login: a refresh token issued with one is bound to this command's key (RFC 9449
        # section 5, for a public client), which dies with it, and the stored login would refresh for no
        # later run. Unbound, it refreshes into tokens bound to each run's own key.
        config = dataclasses.replace(config, dpop=False)
    async with open_loopback(open_browser=open_browser) as redirector:
        provider = OAuthProvider(
            url, config, store=store, on_secret=token_sink(masker), authorizer=authorizer(redirector)
        )
        try:
            async with open_target(HttpTarget(url=url, auth=provider), SessionOptions(name="login")) as session:
                await session.list_tools()
        except McpRunError as exc:
            raise masker.scrub(exc) from None
    return store.find(url, provider.issuer) is not None


def run_logout(args: argparse.Namespace) -> int:
    from runner.auth.store import TokenStore

    store = TokenStore()
    removed = store.remove(args.url)
    if removed:
        print(f"forgot {removed} login(s) for {args.url}", file=sys.stderr)
    else:
        print(f"no login stored for {args.url}", file=sys.stderr)
    return ExitCode.OK
