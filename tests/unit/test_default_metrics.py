"""Process-wide metrics are created once, however many threads ask at the same moment: a
replicate process starts one checkpoint worker per flow, each in its own thread, and two
creations would register the same series twice in the default registry - the second
worker's thread died on DuplicateTimeseries and its flow got no checkpoints (seen in
``make demo``, whose drill runs a flow and its reverse)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from drkit.health import metrics as monitor_metrics
from drkit.offsets import metrics as checkpoint_metrics
from drkit.process_wide import ProcessWide
from drkit.replication import metrics as replication_metrics


@pytest.mark.parametrize(
    ("module", "kind"),
    [
        (checkpoint_metrics, checkpoint_metrics.CheckpointMetrics),
        (replication_metrics, replication_metrics.ReplicationMetrics),
        (monitor_metrics, monitor_metrics.MonitorMetrics),
    ],
)
def test_threads_asking_at_once_get_one_set_of_metrics(
    module: Any, kind: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    created: list[object] = []

    def slow_create(*_args: object, **_kwargs: object) -> object:
        time.sleep(0.05)  # wide enough for every thread to arrive before the first returns
        made = object()
        created.append(made)
        return made

    monkeypatch.setattr(kind, "create", slow_create)
    _forget(module, monkeypatch)
    start = threading.Barrier(8)
    got: list[object] = []

    def ask(default: Callable[[], object] = module.default_metrics) -> None:
        start.wait()
        got.append(default())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(created) == 1
    assert got == created * 8


def _forget(module: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh process-wide slot for this test (the real one is restored afterwards)."""
    monkeypatch.setattr(module, "_DEFAULT", ProcessWide(module._DEFAULT.make))
