"""The dc1/dc2 a run's test processes share are stopped by that run's controller only
(tests/kafka_backends.py): a pytest started by hand in the same checkout while `make test`
ran stopped the suite's clusters at its own end, and every integration test after failed."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from tests import kafka_backends
from tests.kafka_backends import RUN_ID_ENV, SHARED_MARK, stop_shared_clusters


class _Downs:
    """LocalKafka stand-in: records what it was asked to stop."""

    stopped: ClassVar[list[list[str]]] = []

    def __init__(self, base: Path, *, connect: object) -> None:
        self.base = base

    def down(self, names: list[str]) -> None:
        _Downs.stopped.append(list(names))


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DRKIT_TEST_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("DRKIT_TEST_KAFKA", "local")
    monkeypatch.delenv("DRKIT_TEST_KEEP_CLUSTERS", raising=False)
    monkeypatch.setattr(kafka_backends, "LocalKafka", _Downs)
    _Downs.stopped = []
    return tmp_path


def test_another_runs_shared_clusters_are_left_running(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (state / SHARED_MARK).write_text("run-of-make-test dc1 dc2")
    monkeypatch.setenv(RUN_ID_ENV, "a-pytest-started-by-hand")
    stop_shared_clusters()
    assert _Downs.stopped == []
    assert (state / SHARED_MARK).exists()  # its own controller stops them


def test_the_runs_own_shared_clusters_are_stopped_at_its_end(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (state / SHARED_MARK).write_text("run-of-make-test dc1 dc2")
    monkeypatch.setenv(RUN_ID_ENV, "run-of-make-test")
    stop_shared_clusters()
    assert _Downs.stopped == [["dc1", "dc2"]]
    assert not (state / SHARED_MARK).exists()
