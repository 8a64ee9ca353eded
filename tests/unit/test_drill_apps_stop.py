"""The drill's applications stop together: clients stuck on a lost cluster share one wait."""

from __future__ import annotations

import threading

from drkit.drills.workload import App, stop_all


class _Stuck(App):
    """A client blocked in a call to a cluster that never answers (it ignores the stop); notes
    how long each join was allowed to wait for it."""

    def __init__(self, released: threading.Event) -> None:
        super().__init__("stuck")
        self.released = released
        self.joins: list[float | None] = []

    def run(self) -> None:
        self.released.wait()

    def join(self, timeout: float | None = None) -> None:
        self.joins.append(timeout)
        super().join(timeout)


class _Polite(App):
    def run(self) -> None:
        self._stop_event.wait()


WAIT_S = 2.0


def test_stuck_clients_cost_the_wait_once_and_the_others_stop_at_once() -> None:
    released = threading.Event()
    stuck = [_Stuck(released) for _ in range(3)]
    polite = [_Polite("polite") for _ in range(2)]
    for app in [*stuck, *polite]:
        app.start()
    stop_all([*stuck, *polite], wait_s=WAIT_S)
    released.set()
    # Three stuck clients, one wait: the first is waited for up to the whole wait, the others
    # only for what is left of it - nothing, once the first used it up (one after the other
    # they would each be given the whole wait).  What each join was allowed, not a clock
    # (issue 51).
    first, *others = (app.joins for app in stuck)
    assert len(first) == 1 and first[0] is not None and 0 < first[0] <= WAIT_S, first
    assert others == [[0.0]] * (len(stuck) - 1), others
    assert not any(app.is_alive() for app in polite)
    # Those left behind are abandoned: nothing they achieve later is counted.
    assert all(app.abandoned for app in stuck) and not any(app.abandoned for app in polite)


def test_a_single_app_stops_within_its_wait() -> None:
    app = _Polite("polite")
    app.start()
    app.stop(wait_s=5)
    assert not app.is_alive()
