"""The Engine interface: ``engine=`` selects where a run happens, the same for the CLI's ``--engine`` and for
``runner.run_workflow``; the Temporal engine is loaded only when asked for, and without the extra the refusal
is a UsageError naming it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import runner
from runner.api import engine_named
from runner.engine.run import RunOptions
from runner.engines import LocalEngine, TemporalOptions, refuse_unsupported
from runner.errors import UsageError


def test_local_is_the_default_and_takes_no_temporal_options() -> None:
    assert isinstance(engine_named("local"), LocalEngine)
    with pytest.raises(UsageError, match="temporal options"):
        engine_named("local", temporal=TemporalOptions())


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(UsageError, match="engine must be one of 'local', 'temporal', not 'k8s'"):
        engine_named("k8s")


def test_without_temporalio_the_temporal_engine_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "temporalio" else real(name, *a))
    with pytest.raises(
        UsageError, match=r"needs temporalio; install the extra: pip install 'mcp-batch-run\[temporal\]'"
    ):
        engine_named("temporal")
    with pytest.raises(UsageError, match="needs temporalio"):
        runner.run_workflow("wf.yaml", engine="temporal")


@pytest.mark.parametrize(
    ("options", "flag"),
    [
        (TemporalOptions(batch_size=0), "--batch-size must be between 1 and 1000"),
        (TemporalOptions(heartbeat_timeout=0.5), "--heartbeat-timeout must be at least 1 second"),
        (TemporalOptions(open_attempts=0), "open_attempts must be at least 1"),
    ],
)
def test_temporal_options_are_checked_when_the_engine_is_chosen(options: TemporalOptions, flag: str) -> None:
    pytest.importorskip("temporalio")
    with pytest.raises(UsageError, match=flag):
        engine_named("temporal", temporal=options)


def test_the_temporal_engine_is_chosen_by_name() -> None:
    pytest.importorskip("temporalio")
    from runner.temporal.engine import TemporalEngine

    engine = engine_named("temporal", temporal=TemporalOptions(task_queue="q"))
    assert isinstance(engine, TemporalEngine)
    assert engine.options.task_queue == "q"


@pytest.mark.parametrize(
    ("options", "flag"),
    [
        (RunOptions(journal=False), "--no-journal"),
        (RunOptions(retry_failed=True), "--retry-failed"),
        (RunOptions(allow_changed=True), "--allow-changed"),
        (RunOptions(protocol="2025-06-18"), "--protocol-version"),
        (RunOptions(elicitation="decline"), "--elicitation"),
    ],
)
def test_what_temporal_does_not_take_yet_is_refused(options: RunOptions, flag: str) -> None:
    with pytest.raises(UsageError, match=f"{flag} is not available with --engine temporal yet"):
        refuse_unsupported(options)


def test_a_refusal_on_temporal_comes_before_any_connection(tmp_path: Path) -> None:
    """``run_workflow(engine="temporal")`` refuses a missing file, with no Temporal at the address."""
    pytest.importorskip("temporalio")
    nowhere = TemporalOptions(address="127.0.0.1:9")
    with pytest.raises(UsageError, match="no workflow file"):
        runner.run_workflow(tmp_path / "missing.yaml", engine="temporal", temporal=nowhere)


def test_choosing_the_local_engine_loads_nothing_of_temporal() -> None:
    code = (
        "import sys, runner\n"
        "runner.engine_named('local')\n"
        "print(','.join(m for m in sys.modules if m.startswith(('temporalio', 'runner.temporal'))))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
