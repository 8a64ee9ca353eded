"""Runbooks match the engine's steps; the lease admits one run at a time; hooks veto; runs are
durable - on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import json
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from drkit.config.model import HookConfig
from drkit.errors import ConfigError, LeaseLost
from drkit.failover.hooks import run_hooks
from drkit.failover.lease import LeaseHeld, LeaseRepository
from drkit.failover.model import Procedure, StepName
from drkit.failover.pointer import PointerRepository
from drkit.failover.runbook import load_runbook, runbooks_dir
from drkit.failover.steps import STEPS
from drkit.store import StateStore
from drkit.store.models import LeaseRow


@pytest.fixture
def store(migrated_store: StateStore) -> StateStore:
    return migrated_store


# -- runbooks ---------------------------------------------------------------------------------


def test_runbook_steps_and_the_engine_steps_are_the_same_set() -> None:
    named: set[StepName] = set()
    for procedure in Procedure:
        runbook = load_runbook(procedure)
        named |= {s.name for s in runbook.steps} | {s.rollback for s in runbook.steps if s.rollback}
    assert named == set(STEPS), "a runbook step without an implementation, or the reverse"
    assert set(StepName) == set(STEPS)


def test_every_runbook_has_its_page_for_humans() -> None:
    for procedure in Procedure:
        page = runbooks_dir() / f"{procedure.value}.md"
        assert page.is_file(), page
        text_ = page.read_text()
        assert f"drkit {procedure.value}" in text_  # quotes the exact command


def test_a_broken_runbook_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "failover.yaml").write_text(
        "procedure: failover\nsteps:\n  - name: promote_everything\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_runbook(Procedure.FAILOVER, tmp_path)
    assert "steps.0.name" in str(caught.value)


# -- the lease --------------------------------------------------------------------------------


def test_one_holder_at_a_time_and_tokens_fence_the_old_one(store: StateStore) -> None:
    leases = LeaseRepository(store)
    first = leases.acquire("engine-a", ttl_s=60)
    with pytest.raises(LeaseHeld) as held:
        leases.acquire("engine-b", ttl_s=60)
    assert "engine-a" in str(held.value)
    # engine-a stalls past its lease; engine-b takes over with a new token.
    with store.session() as session:
        session.execute(
            update(LeaseRow).values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
        )
    second = leases.acquire("engine-b", ttl_s=60)
    assert second.token == first.token + 1
    with pytest.raises(LeaseLost):
        leases.renew(first, ttl_s=60)
    assert leases.renew(second, ttl_s=60).token == second.token


def test_concurrent_acquirers_exactly_one_wins(store: StateStore) -> None:
    leases = LeaseRepository(store)
    winners: list[str] = []
    losers: list[str] = []
    barrier = threading.Barrier(6)

    def contend(name: str) -> None:
        barrier.wait()
        try:
            leases.acquire(name, ttl_s=60)
            winners.append(name)
        except LeaseHeld:
            losers.append(name)

    threads = [threading.Thread(target=contend, args=(f"engine-{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(winners) == 1 and len(losers) == 5


# -- pointer ----------------------------------------------------------------------------------


def test_pointer_moves_once_per_run(store: StateStore) -> None:
    pointers = PointerRepository(store)
    assert pointers.get() is None
    assert pointers.move("dc2", run_id=1).epoch == 1
    assert pointers.move("dc2", run_id=1).epoch == 1  # the same run again: idempotent
    assert pointers.move("dc1", run_id=2).epoch == 2
    current = pointers.get()
    assert current is not None and (current.cluster, current.run_id) == ("dc1", 2)


# -- hooks ------------------------------------------------------------------------------------


def _hook(when: str, code: str, timeout_s: float = 10.0, step: str = "move_pointer") -> HookConfig:
    return HookConfig.model_validate(
        {
            "when": when,
            "step": step,
            "command": [sys.executable, "-c", code],
            "timeout_s": timeout_s,
        }
    )


def test_hooks_get_the_json_context_and_a_failing_before_hook_vetoes(tmp_path: Path) -> None:
    seen = tmp_path / "context.json"
    record = _hook(
        "before", f"import sys,pathlib; pathlib.Path({str(seen)!r}).write_text(sys.stdin.read())"
    )
    veto = _hook("before", "import sys; print('not now'); sys.exit(3)")
    never = _hook("before", "raise SystemExit(0)")
    outcomes = run_hooks(
        [record, veto, never], "before", "move_pointer", {"run": 7, "target": "dc2"}
    )
    context = json.loads(seen.read_text())
    assert context == {
        "schema": "drkit.failover.hook/v1",
        "run": 7,
        "target": "dc2",
        "step": "move_pointer",
        "when": "before",
    }
    assert [o.ok for o in outcomes] == [True, False]  # the veto stops the hooks after it
    assert outcomes[1].exit_code == 3 and "not now" in outcomes[1].output


def test_a_hanging_or_missing_hook_is_a_clean_failure() -> None:
    started = time.monotonic()
    [hung] = run_hooks(
        [_hook("before", "import time; time.sleep(600)", 0.5)], "before", "move_pointer", {}
    )
    assert hung.timed_out and not hung.ok
    # Killed at its 0.5 s timeout, not waited for (600 s): a hang guard at a tenth of that,
    # 100 times the timeout (issue 51: not a speed).
    assert time.monotonic() - started < 60
    missing = HookConfig.model_validate({"when": "after", "command": ["/nonexistent/hook"]})
    [gone] = run_hooks([missing], "after", "drain", {})
    assert not gone.ok and gone.exit_code is None
    assert run_hooks([missing], "before", "drain", {}) == []  # only 'after' hooks of the step


def test_example_hook_rewrites_bootstrap_servers_and_keeps_the_rest(tmp_path: Path) -> None:
    import subprocess

    properties = tmp_path / "client.properties"
    properties.write_text("bootstrap.servers=old:9092\nacks=all\n")
    hook = runbooks_dir() / "hooks" / "rewrite-client-properties.py"
    done = subprocess.run(
        [sys.executable, str(hook), str(properties)],
        input=json.dumps({"run": 3, "target": "dc2", "target_bootstrap_servers": "new:9092"}),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert properties.read_text() == "acks=all\nbootstrap.servers=new:9092\n"
