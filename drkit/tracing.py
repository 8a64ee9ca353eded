"""Failover runs as OpenTelemetry traces: one span per run, a child span per step.

Off unless ``tracing`` in the config names a destination: ``file`` (JSON lines, one finished
span per line, written as each span ends - a run killed half-way leaves the steps it finished)
and/or ``otlp_endpoint`` (OTLP over HTTP to a collector, batched, flushed when the run's
execution ends); drkit.tracing_export wires the SDK. Every execution has its own tracer
provider, shut down at the end, so nothing lingers in a long-lived monitor and tests can read
the spans back at once. Off, nothing of OpenTelemetry is imported and the spans are inert.

Attributes (bounded, never a secret): ``drkit.run.id``, ``drkit.procedure``, ``drkit.source``,
``drkit.target``, ``drkit.direction`` on the run; ``drkit.step``, ``drkit.outcome`` (the step's
recorded state, or ``failed``/``lease_lost``) and ``drkit.duration_s`` on each step; the run's
span ends with ``drkit.outcome`` = the run's state.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from drkit.config.model import TracingConfig
from drkit.errors import LeaseLost

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

SCOPE = "drkit.failover"


class SpanLike(Protocol):
    """What the engine does with a span (an OpenTelemetry span, or inert when tracing is off)."""

    def set_attribute(self, key: str, value: Any) -> Any: ...


class _Inert:
    def set_attribute(self, key: str, value: Any) -> None:
        return None


class RunTracer:
    """The spans of one execution of a run (see the module docstring)."""

    def __init__(self, config: TracingConfig) -> None:
        self._provider: TracerProvider | None = None
        if config.file is not None or config.otlp_endpoint is not None:
            from drkit.tracing_export import provider_for

            self._provider = provider_for(config)

    @property
    def active(self) -> bool:
        """Whether spans go anywhere (``tracing`` names a file or a collector)."""
        return self._provider is not None

    @contextmanager
    def run(self, attributes: dict[str, Any]) -> Iterator[SpanLike]:
        """The run's span (current while its steps run); ended, and exported, on the way out."""
        if self._provider is None:
            yield _Inert()
            return
        from drkit import __version__

        tracer = self._provider.get_tracer(SCOPE, __version__)
        try:
            with tracer.start_as_current_span("failover run", attributes=attributes) as span:
                yield span
        finally:
            self._provider.shutdown()  # flushes the batch to the collector

    @contextmanager
    def step(self, name: str, attributes: dict[str, Any]) -> Iterator[SpanLike]:
        """A step's span; an exception out of it marks the span failed and goes on up."""
        if self._provider is None:
            yield _Inert()
            return
        from opentelemetry.trace import Status, StatusCode

        from drkit import __version__

        tracer = self._provider.get_tracer(SCOPE, __version__)
        started = time.monotonic()
        with tracer.start_as_current_span(
            f"step {name}", attributes={"drkit.step": name, **attributes},
            record_exception=False, set_status_on_exception=False,
        ) as span:  # fmt: skip
            try:
                yield span
            except BaseException as err:
                span.set_attribute("drkit.outcome", _failure(err))
                span.set_status(Status(StatusCode.ERROR, str(err)[:500]))
                raise
            finally:
                span.set_attribute("drkit.duration_s", round(time.monotonic() - started, 6))


def _failure(err: BaseException) -> str:
    return "lease_lost" if isinstance(err, LeaseLost) else "failed"
