"""`drkit flows repoint` holds the flow it replaces before it copies (issue 48): the run sets
flow dc1->dc3 STOPPED in the store, publishes it on the flow's control channel on dc3 (the
in-memory one of tests/fake_kafka.py) and waits for its live workers to acknowledge it - only
then does the follow-on (follow_standby: every read and write of the copy) start.  A live
worker that does not acknowledge within --wait refuses the run with one line and no traceback
(exit 1), nothing copied.  The run's output and JSON say the flow is held and how to let it
run again; --plan says the run will stop it.

Without the hold, should dc1 return while `drkit replicate` runs dc1->dc3, its workers would
resume from their committed progress and copy into dc3's replica again what the follow-on
copied, and dc1's divergent tail."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from drkit.cli import flows_cmd
from drkit.control import ControlRepository, DesiredState
from drkit.control.channel import ChannelFactory
from drkit.control.model import FlowDirective
from drkit.failover.lease import LeaseRepository
from drkit.offsets import follow_on
from drkit.store import StateStore
from drkit.store.models import FlowAck
from tests.fake_kafka import FakeClusters, fake_channels
from tests.unit.test_repoint_refusals import _config, _point, _repoint, _report, _store

FLOW = "dc1->dc3"


@contextmanager
def _worker(store: StateStore, obeys: bool) -> Iterator[None]:
    """A live worker of dc1->dc3 reporting in the store every 50 ms: one that acts on the
    directive (as drkit.control.gate's does), or one stuck on RUNNING at epoch 0 (alive, never
    acknowledging - a worker whose loop is wedged)."""
    control = ControlRepository(store)
    done, reported = threading.Event(), threading.Event()

    def report() -> None:
        while not done.is_set():
            directive = control.directive(FLOW)
            if obeys:
                control.ack(FLOW, "w1", directive.epoch, directive.desired)
            else:
                control.ack(FLOW, "w1", 0, DesiredState.RUNNING)
            reported.set()
            done.wait(0.05)

    thread = threading.Thread(target=report, daemon=True)
    thread.start()
    # Live from its first report on: a run started before it would rightly see no worker (a
    # fresh-clone run, the machine busy, did - and went ahead with nothing to wait for).
    assert reported.wait(30), "the worker never reported"
    try:
        yield
    finally:
        done.set()
        thread.join()


class _Run:
    """The run with its clusters in memory: dc3's control channel a fake, both clusters
    answering, and follow_standby (where the first read and the first write of the copy are)
    replaced by a stand-in that records what the channel and the store held when it began."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, store: StateStore) -> None:
        self.clusters = FakeClusters("dc1", "dc2", "dc3")
        self.store = store
        self.copy_began: list[tuple[FlowDirective | None, list[tuple[int, DesiredState]]]] = []
        self.leased: list[tuple[str | None, bool]] = []  # the lease's holder; confirm passed

        def channels(_config: object, _keys: object) -> ChannelFactory:
            return fake_channels(self.clusters)

        def follow_standby(*_args: object, **kwargs: object) -> tuple[Any, Any]:
            holder = LeaseRepository(store).holder()
            held = holder.owner if holder is not None and holder.remaining_s > 0 else None
            self.leased.append((held, callable(kwargs.get("confirm"))))
            published = self.published()
            acks = [(a.epoch, a.state) for a in ControlRepository(store).acks(FLOW)]
            self.copy_began.append((published, acks))
            report = _report(untold=False)
            return report, {}

        monkeypatch.setattr("drkit.control.channel.kafka_channels", channels)
        monkeypatch.setattr(flows_cmd, "_require_answering", lambda _config, _alias: None)
        monkeypatch.setattr(follow_on, "follow_standby", follow_standby)

    def published(self) -> FlowDirective | None:
        """The directive dc1->dc3's control channel on dc3 holds."""
        found = self.clusters["dc3"].channels.get(FLOW, {}).get("directive")
        assert found is None or isinstance(found, FlowDirective)
        return found


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> _Run:
    """The pointer on dc2 after a run from dc1, and the run's clusters in memory."""
    store = _store(tmp_path)
    _point(store, "dc2", "dc1")
    return _Run(monkeypatch, store)


def test_the_run_holds_the_replaced_flow_stopped_before_its_first_read_or_write(
    tmp_path: Path, run: _Run
) -> None:
    config, store = _config(tmp_path), run.store
    with _worker(store, obeys=True):
        code, out = _repoint(tmp_path, config, "--output", "json")
    assert code == 0, out
    # When the copy began: STOPPED was on dc3's channel, and the live worker acted on it.
    [(published, acks)] = run.copy_began
    assert published is not None and published.desired is DesiredState.STOPPED, published
    assert acks == [(published.epoch, DesiredState.STOPPED)], acks
    # ... and the copy ran under the failover lease, confirming it before its writes.
    [(owner, confirms)] = run.leased
    assert owner is not None and owner.startswith("cli-flows") and confirms, run.leased
    stored = ControlRepository(store).directive(FLOW)
    assert (stored.desired, stored.epoch) == (DesiredState.STOPPED, published.epoch)
    assert "drkit flows repoint --from dc1 --to dc2 --standby dc3" in stored.reason
    hold = json.loads(out)["hold"]
    assert hold["flow"] == FLOW and hold["held"] and hold["acknowledged"] == ["w1"], hold
    assert hold["undo"].startswith(f"drkit flows start {FLOW} --reason"), hold
    # A second run keeps the directive (no new epoch) and says the flow is held, in text.
    with _worker(store, obeys=True):
        code, out = _repoint(tmp_path, config)
    assert code == 0, out
    assert ControlRepository(store).directive(FLOW).epoch == published.epoch
    assert f"flow {FLOW} held STOPPED (epoch {published.epoch}; acknowledged by w1)" in out, out
    assert f"to let it run again: drkit flows start {FLOW}" in out, out


def test_a_live_worker_that_does_not_acknowledge_refuses_the_run_with_nothing_copied(
    tmp_path: Path, run: _Run
) -> None:
    config, store = _config(tmp_path), run.store
    with _worker(store, obeys=False):
        code, out = _repoint(tmp_path, config, "--wait", "1")
    assert code == 1, out
    assert run.copy_began == [], "the copy began although the flow was not held"
    flat = " ".join(out.split())
    assert "re-point refused, nothing copied: dc1->dc3 is set STOPPED but not held" in flat, out
    assert "workers w1 of dc1->dc3 did not acknowledge stopped within 1.0s" in flat, out
    published = run.published()  # stays held for workers cut off from the store
    assert published is not None and published.desired is DesiredState.STOPPED


def test_a_silent_worker_inside_its_silence_window_refuses_the_run(
    tmp_path: Path, run: _Run
) -> None:
    """Heard from 10 s ago (silent: not live), inside the 30 s window in which it may still
    copy on its last directive; --wait 1 ends before the window does."""
    config, store = _config(tmp_path), run.store
    ControlRepository(store).ack(FLOW, "w9", 0, DesiredState.RUNNING)
    with store.session() as session:
        row = session.scalars(select(FlowAck)).one()
        row.at -= timedelta(seconds=10)
    code, out = _repoint(tmp_path, config, "--wait", "1")
    assert code == 1, out
    assert run.copy_began == []
    flat = " ".join(out.split())
    assert "dc1->dc3 is set STOPPED but not held: workers w9 are silent" in flat, out
    assert "run the re-point again with a --wait of at least 30" in flat, out


def test_a_flow_whose_channel_cannot_be_published_on_refuses_the_run(
    tmp_path: Path, run: _Run
) -> None:
    config = _config(tmp_path)
    run.clusters["dc3"].up = False
    code, out = _repoint(tmp_path, config)
    assert code == 1, out
    assert run.copy_began == []
    assert "re-point refused, nothing copied: dc1->dc3 is not held" in " ".join(out.split())


def test_the_plan_says_the_run_stops_the_replaced_flow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = _config(tmp_path)
    store = _store(tmp_path)
    monkeypatch.setattr(flows_cmd, "_read_repoint", lambda *_args: _report(untold=False))
    code, out = _repoint(tmp_path, config, "--plan")
    assert code == 0, out
    assert f"the run first stops flow {FLOW} (its live workers must acknowledge" in out, out
    code, out = _repoint(tmp_path, config, "--plan", "--output", "json")
    hold = json.loads(out)["hold"]
    assert (hold["flow"], hold["desired"], hold["held"]) == (FLOW, "stopped", False), hold
    assert ControlRepository(store).directive(FLOW).epoch == 0  # the plan wrote none
