"""The Spark job is run again when it failed on what a cluster just back answers for a moment."""

from __future__ import annotations

from typing import Any

import pytest

from drkit.accounting.verify import is_transient_kafka, run_retrying

LOADING = (
    "An error occurred while calling o87.count. Caused by: org.apache.kafka.common.errors."
    "UnknownTopicOrPartitionException: This server does not host this topic-partition."
)


class _Job:
    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> Any:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return {"ok": True}


def test_a_transient_kafka_error_is_retried_and_the_second_run_counts() -> None:
    job = _Job(RuntimeError(LOADING))
    assert run_retrying(job, wait_s=0)["ok"] is True
    assert job.calls == 2


def test_any_other_failure_is_raised_at_once() -> None:
    job = _Job(RuntimeError("AnalysisException: cannot resolve column"))
    with pytest.raises(RuntimeError, match="AnalysisException"):
        run_retrying(job, wait_s=0)
    assert job.calls == 1


def test_a_transient_error_that_persists_is_raised_after_the_last_attempt() -> None:
    job = _Job(*(RuntimeError(LOADING) for _ in range(5)))
    with pytest.raises(RuntimeError, match="UnknownTopicOrPartition"):
        run_retrying(job, attempts=3, wait_s=0)
    assert job.calls == 3
    assert not is_transient_kafka(RuntimeError("TopicAuthorizationException"))
