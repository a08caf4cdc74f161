"""The scheduler's test harness: fake servers by name over memory transports, and a plan run on them.

``Harness({"s": echo_tools})`` serves server ``s`` with a :class:`tests.fakes.server.FakeServer` set up by
``echo_tools``; ``await run_plan(plan_of(CHAIN), harness, events=events)`` runs a workflow's plan on the
scheduler (retries, backoff and resume as the CLI would set them up, without files) and returns its outcome.
Use them under trio's virtual clock (``autojump_clock``): the fakes sleep on it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import trio

from runner._trio import single_error
from runner.backoff import Backoff
from runner.engine.calls.retry import RetryPolicy
from runner.engine.core.events import encode
from runner.engine.core.outcome import Outcome
from runner.engine.core.resume import Prior
from runner.engine.core.state import RunState
from runner.engine.journal.writer import EventLog, Masker
from runner.engine.scheduler import Scheduler, SchedulerOptions
from runner.errors import ConnectFailed, NotDelivered, SessionExpired, Throttled
from runner.session import Session, SessionOptions, open_session
from runner.testing.memory import memory_transport_pair
from runner.workflow.loader import parse_workflow, validate
from runner.workflow.plan import Plan
from tests.fakes.server import FakeCall, FakeServer, text_result
from tests.support import folded

Setup = Callable[[FakeServer], None]
"""Sets up one fake server: registers its tools (``server.tools.update(...)``), scripts its quirks."""


def plan_of(text: str, **inputs: str) -> Plan:
    """The validated plan of a workflow's text, with ``inputs`` given as on the command line."""
    return validate(parse_workflow(text), require_inputs=True, input_pairs=[f"{k}={v}" for k, v in inputs.items()])


class Harness:
    """Fake servers by name; every session opened is recorded.

    ``opener`` is the scheduler's way to get a session: each call starts a new :class:`FakeServer` for the name,
    set up by its :data:`Setup`. ``fail_open``, ``undelivered_calls``, ``expired_calls`` and ``refuse`` (a 429)
    script failures.
    """

    def __init__(self, setups: dict[str, Setup]) -> None:
        self.setups = setups
        self.servers: dict[str, list[FakeServer]] = {}
        self.opened: list[str] = []
        self.fail_open: set[str] = set()
        self.undelivered_calls = 0  # this many tools/call sends fail before a byte is written
        self.expired_calls = 0  # this many tools/call sends find the session forgotten (then renewed)
        self.refuse: Callable[[], Throttled | None] | None = None  # a tools/call send it answers is refused

    @asynccontextmanager
    async def opener(self, name: str, options: SessionOptions) -> AsyncIterator[Session]:
        self.opened.append(name)
        if name in self.fail_open:
            raise ConnectFailed(f"{name}: could not start")
        with single_error():
            # Queued writes, as over stdio (the servers are `command:` ones): the path a fan-out's calls take.
            async with memory_transport_pair(queued=True) as (client, end), trio.open_nursery() as nursery:
                server = FakeServer(end)
                self.setups[name](server)
                self.servers.setdefault(name, []).append(server)
                nursery.start_soon(server.serve)
                original_send = client.send

                async def send(message: Any) -> None:
                    if getattr(message, "method", None) == "tools/call" and self.undelivered_calls > 0:
                        self.undelivered_calls -= 1
                        raise NotDelivered("connection refused")
                    if getattr(message, "method", None) == "tools/call" and self.refuse is not None:
                        refused = self.refuse()
                        if refused is not None:
                            raise refused
                    if getattr(message, "method", None) == "tools/call" and self.expired_calls > 0:
                        self.expired_calls -= 1
                        raise SessionExpired("404: the server no longer knows the session")
                    await original_send(message)

                client.send = send  # type: ignore[method-assign]
                async with open_session(client, options) as session:
                    yield session
                nursery.cancel_scope.cancel()

    def calls(self, name: str) -> list[Any]:
        return [c for s in self.servers.get(name, []) for c in s.calls]


@dataclass
class Resume:
    """A resume in a test: the journal so far (its events), and the decisions about what it left."""

    events: list[dict[str, Any]]
    in_doubt: str = "ask"
    fresh_steps: set[str] = field(default_factory=set)


async def run_plan(
    plan: Plan,
    harness: Harness,
    *,
    prior: Resume | None = None,
    events: list[dict[str, Any]] | None = None,
    concurrency: int = 16,
    control: Callable[[Scheduler], Any] | None = None,
    warnings: list[str] | None = None,
    secrets: dict[str, str] | None = None,
    journal_fd: int | None = None,
    offload: Callable[..., Awaitable[None]] | None = None,
) -> Outcome:
    """Run ``plan`` on the harness's fake servers; ``events`` collects what the run journaled (journal form,
    masked with ``secrets``: placeholder name -> value), ``warnings`` what it warned about. With
    ``journal_fd`` the journal's lines are also written there (as a run writes its file), by ``offload`` (the
    event log's, called as ``offload(write, data, sync)``; by default inline)."""
    state = folded(prior.events) if prior is not None else RunState()
    log = EventLog(journal_fd, start_seq=state.last_seq, masker=Masker(secrets), offload=offload or _inline)
    log.subscribe(state.apply)
    if events is not None:
        log.subscribe(lambda entry: events.append(encode(entry)))
    scheduler = Scheduler(
        plan,
        inputs=dict(plan.input_values or {}),
        env={},
        opener=harness.opener,
        log=log,
        state=state,
        options=SchedulerOptions(
            concurrency=concurrency, retry=RetryPolicy(attempts=3), backoff=Backoff(initial=1, maximum=30, jitter=0)
        ),
        prior=Prior(in_doubt=prior.in_doubt, fresh_steps=prior.fresh_steps) if prior is not None else None,  # type: ignore[arg-type]
        on_warning=warnings.append if warnings is not None else None,
    )
    with single_error():
        async with trio.open_nursery() as writer:
            await writer.start(log.run)
            async with trio.open_nursery() as nursery:
                if control is not None:
                    nursery.start_soon(control, scheduler)
                outcome = await scheduler.run()
                nursery.cancel_scope.cancel()
            log.close()
    return outcome


async def _inline(fn: Callable[..., None], *args: Any) -> None:
    """Journal writes in the test's own thread: the virtual clock sees every step."""
    fn(*args)


def echo_tools(server: FakeServer) -> None:
    """Tools ``echo``, ``upper`` (structured too), ``listing`` (``n`` names as JSON text), ``fail`` (a tool
    error) and ``slow`` (sleeps ``seconds``, 10 by default, on the clock)."""

    async def echo(call: FakeCall) -> dict[str, Any]:
        return text_result(str(call.arguments.get("text")))

    async def upper(call: FakeCall) -> dict[str, Any]:
        return {
            "content": [{"type": "text", "text": str(call.arguments.get("text")).upper()}],
            "structuredContent": {"value": str(call.arguments.get("text")).upper()},
        }

    async def listing(call: FakeCall) -> dict[str, Any]:
        n = int(call.arguments.get("n", 3))
        return text_result('["' + '","'.join(f"f{i}" for i in range(n)) + '"]')

    async def fail(call: FakeCall) -> dict[str, Any]:
        return text_result(f"failed on {call.arguments.get('text')}", is_error=True)

    async def slow(call: FakeCall) -> dict[str, Any]:
        await trio.sleep(float(call.arguments.get("seconds", 10)))
        return text_result("slow done")

    server.tools.update(echo=echo, upper=upper, listing=listing, fail=fail, slow=slow)


# A fan-out of ``echo`` on server ``s`` over the items written in place of ITEMS (a JSON list), keyed by the item.
FANOUT = """
version: 1
servers:
  s: {command: [fake]}
steps:
  fan:
    server: s
    tool: echo
    for_each: ITEMS
    key: ${{ item }}
    args: {text: "${{ item }}"}
"""

# A three-step chain on server ``s``: a listing, a fan-out over it, and a report joining the fan-out.
CHAIN = """
version: 1
servers:
  s: {command: [fake]}
steps:
  files:
    server: s
    tool: listing
    args: {n: 4}
  convert:
    server: s
    tool: upper
    for_each: ${{ steps.files.json }}
    args: {text: "${{ item }}"}
  report:
    server: s
    tool: echo
    args: {text: "${{ join(',', steps.convert.results[*].structured.value) }}"}
outputs:
  report: ${{ steps.report.text }}
  count: ${{ length(steps.convert.items) }}
"""
