"""Flow control's store access: directives read together, a worker's ack written in place -
on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

from drkit.control.model import DesiredState
from drkit.control.repo import ControlRepository
from drkit.store import StateStore


def test_directives_of_many_flows_are_read_together_with_defaults_for_the_unwritten(
    migrated_store: StateStore,
) -> None:
    control = ControlRepository(migrated_store)
    control.set("a", DesiredState.STOPPED, "switchover", run_id=None)
    control.set("a", DesiredState.RUNNING, "rolled back", run_id=None)
    found = control.directives({"a": DesiredState.PAUSED, "b": DesiredState.PAUSED})
    assert (found["a"].desired, found["a"].epoch, found["a"].reason) == (
        DesiredState.RUNNING, 2, "rolled back",
    )  # fmt: skip
    assert (found["b"].desired, found["b"].epoch) == (DesiredState.PAUSED, 0)
    assert found["a"] == control.directive("a") and found["b"] == control.directive(
        "b", DesiredState.PAUSED
    )
    assert control.directives({}) == {}


def test_a_workers_ack_is_one_row_updated_in_place(migrated_store: StateStore) -> None:
    control = ControlRepository(migrated_store)
    control.ack("a", "w1", 1, DesiredState.RUNNING)
    control.ack("a", "w2", 1, DesiredState.RUNNING)
    control.ack("a", "w1", 2, DesiredState.STOPPED, failure="source gone")
    control.ack("b", "w1", 5, DesiredState.RUNNING)
    acks = {a.worker: a for a in control.acks("a")}
    assert sorted(acks) == ["w1", "w2"]
    assert (acks["w1"].epoch, acks["w1"].state, acks["w1"].failure) == (
        2, DesiredState.STOPPED, "source gone",
    )  # fmt: skip
    assert (acks["w2"].epoch, acks["w2"].state, acks["w2"].failure) == (
        1, DesiredState.RUNNING, None,
    )  # fmt: skip
    control.ack("a", "w1", 3, DesiredState.RUNNING)  # a later report clears the failure
    [w1] = [a for a in control.acks("a") if a.worker == "w1"]
    assert (w1.epoch, w1.failure) == (3, None) and w1.age_s >= 0
    assert [a.worker for a in control.acks("b")] == ["w1"]
