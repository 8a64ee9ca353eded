"""Where a traced run's spans go: the OpenTelemetry SDK's provider with drkit's exporters.

Imported only when ``tracing`` names a destination (drkit.tracing), so a failover that traces
nothing does not pay for the SDK's import at start-up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from drkit import __version__
from drkit.config.model import TracingConfig
from drkit.private_files import open_private_append

log = logging.getLogger(__name__)


class JsonLinesExporter(SpanExporter):
    """Appends each finished span to ``path`` as one line of JSON (the SDK's span document)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._warned = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        lines = "".join(span.to_json(indent=None) + "\n" for span in spans)
        try:
            with self._lock, open_private_append(self.path) as out:
                out.write(lines)
        except OSError as err:
            if not self._warned:  # once per run: the run goes on without its trace
                self._warned = True
                log.warning("spans not written", extra={"file": str(self.path), "error": str(err)})
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


def provider_for(config: TracingConfig) -> TracerProvider:
    """A provider exporting to the file (as each span ends) and/or the collector (batched,
    flushed by ``shutdown()``)."""
    service = {"service.name": config.service_name, "service.version": __version__}
    provider = TracerProvider(resource=Resource.create(service))
    if config.file is not None:
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(config.file)))
    if config.otlp_endpoint is not None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=config.otlp_endpoint, timeout=5)
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider
