"""A side effect a lease allowed is sent only while that lease surely lasts: the budget
remembers the lease's end, and the cluster adapters check it right before they send and before
each retry - a process frozen between the confirmation and the request sends nothing."""

from __future__ import annotations

import pickle

import pytest

from drkit import clock
from drkit.clock import Budget, time_left
from drkit.errors import LeaseLost, RetriableKafkaError
from drkit.failover.lease import Lease, request_budget
from drkit.kafka import ClusterEndpoint
from drkit.kafka.admin_base import AdminBase


def _lease(valid_for: float) -> Lease:
    from datetime import UTC, datetime

    now = clock.monotonic()
    return Lease("failover", "engine:a", 7, datetime.now(UTC), now + valid_for)


def test_a_budget_from_a_lease_remembers_when_the_lease_surely_ends() -> None:
    budget = request_budget(_lease(20.0), 5.0)
    assert isinstance(budget, Budget) and float(budget) == 5.0
    assert budget.lease_until == pytest.approx(clock.monotonic() + 20.0, abs=0.5)
    uncapped = request_budget(_lease(20.0), None)
    assert isinstance(uncapped, Budget) and float(uncapped) == pytest.approx(20.0, abs=0.5)
    # A budget passed on keeps its lease's end, capped by the new caller's timeout.
    again = request_budget(budget, 2.0)
    assert isinstance(again, Budget) and float(again) == 2.0
    assert again.lease_until == budget.lease_until
    # Plain timeouts stay plain; a Budget crosses to a helper process whole.
    assert request_budget(None, 3.0) == 3.0 and not isinstance(request_budget(None, 3.0), Budget)
    copied = pickle.loads(pickle.dumps(budget))
    assert (float(copied), copied.lease_until) == (float(budget), budget.lease_until)


def test_time_left_is_cut_to_the_lease_and_refuses_once_it_has_passed() -> None:
    now = clock.monotonic()
    assert time_left(7.0, "x") == 7.0 and time_left(None, "x") is None
    assert time_left(Budget(10.0, now + 3.0), "x") == pytest.approx(3.0, abs=0.5)
    assert time_left(Budget(2.0, now + 30.0), "x") == 2.0
    with pytest.raises(LeaseLost, match=r"create ACLs: not sent - the lease .* may have lapsed"):
        time_left(Budget(5.0, now - 4.0), "create ACLs")


def test_the_adapter_sends_nothing_on_a_spent_budget_and_retries_only_within_it() -> None:
    admin = AdminBase(ClusterEndpoint.plain("dc9", "127.0.0.1:1"), isolate=False)
    try:
        sent: list[float] = []

        def send(timeout: float) -> str:
            sent.append(timeout)
            return "ok"

        stale = Budget(30.0, clock.monotonic() - 1.0)  # frozen past the lease since
        with pytest.raises(LeaseLost):
            admin._call("alter offsets of groups", stale, send)
        assert sent == []
        assert admin._call("create ACLs", Budget(30.0, clock.monotonic() + 2.0), send) == "ok"
        assert sent[-1] <= 2.0  # the try waits no longer than the lease surely lasts

        tries: list[float] = []

        def failing(timeout: float) -> str:
            tries.append(clock.monotonic())
            raise RetriableKafkaError("broker busy")

        lease_end = clock.monotonic() + 1.5
        with pytest.raises((LeaseLost, RetriableKafkaError)):
            admin._call("delete ACLs", Budget(30.0, lease_end), failing)
        assert tries and max(tries) < lease_end  # no retry was sent past the lease
    finally:
        admin.close()


def test_a_budget_crosses_to_the_isolated_helper_which_sends_nothing_once_it_is_spent() -> None:
    """The offset-commit round runs in the cluster's isolated helper process: the budget
    crosses whole, the helper checks it before its tries, and its LeaseLost comes back as
    LeaseLost (not a retriable error the step would fail on)."""
    from drkit.kafka.admin import KafkaAdmin
    from drkit.kafka.isolated import helper_for

    endpoint = ClusterEndpoint.plain("dc8", "127.0.0.1:1")
    helper = helper_for(KafkaAdmin, endpoint, 5.0, "budget-test")
    try:
        rows = {"billing": [("orders", 0, 5)]}
        spent = Budget(30.0, clock.monotonic() - 1.0)
        with pytest.raises(LeaseLost, match="not sent"):
            helper.call("_direct_alter_group_rows", rows, timeout_s=spent)
    finally:
        helper.close()


def test_a_lease_that_lapsed_before_the_request_gives_no_budget_at_all() -> None:
    """Found by the simulation (seed 101167): a process frozen inside its confirmation, after
    the store write, woke past the lease; a 0.1 s floor made that a fresh budget, and it applied
    a stale fence after another engine had taken the run over."""
    with pytest.raises(LeaseLost, match="lapsed between its confirmation"):
        request_budget(_lease(-1.0), 5.0)
    with pytest.raises(LeaseLost):
        request_budget(_lease(0.0), None)
