"""Webhook notifications: what drkit decided and did, for people and their alerting.

Each event becomes one POST of a JSON body in Alertmanager's webhook format (``version`` "4",
one alert with ``labels`` and ``annotations``), so anything that receives Alertmanager's
webhooks - chat bridges, incident tools - receives drkit's.  ``alertname`` is
``Drkit<Event>`` (e.g. ``DrkitFailoverStarted``); labels carry the event, source and target
clusters and the run; annotations carry the summary and the details as JSON.

Delivery never blocks or breaks the caller: each POST runs in a daemon thread with three
attempts (tenacity), and a webhook that still fails is logged without its URL (it may hold a
token) and counted in ``drkit_notifications_failed_total``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import urllib.request
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import Counter
from tenacity import retry, stop_after_attempt, wait_exponential

from drkit.config.model import NotificationEvent, WebhookConfig

log = logging.getLogger(__name__)

_FAILED = Counter(
    "drkit_notifications_failed_total",
    "Webhook notifications that could not be delivered after retries",
    ["event"],
)
_SEVERITY = {
    NotificationEvent.DECISION: "info",
    NotificationEvent.BLOCKED: "warning",
    NotificationEvent.FAILOVER_STARTED: "critical",
    NotificationEvent.FAILOVER_FINISHED: "critical",
    NotificationEvent.DIVERGENCE: "warning",
}


def alertmanager_body(
    event: NotificationEvent,
    source: str,
    target: str,
    summary: str,
    detail: Mapping[str, Any],
    run_id: int | None = None,
    at: float | None = None,
) -> dict[str, Any]:
    """The webhook body for one event (pure)."""
    name = "Drkit" + "".join(part.title() for part in event.value.split("_"))
    labels = {
        "alertname": name,
        "event": event.value,
        "severity": _SEVERITY[event],
        "source": source,
        "target": target,
    }
    if run_id is not None:
        labels["run"] = str(run_id)
    started = datetime.fromtimestamp(at, UTC) if at is not None else datetime.now(UTC)
    fingerprint = hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]
    alert = {
        "status": "firing",
        "labels": labels,
        "annotations": {"summary": summary, "detail": json.dumps(detail, default=str)},
        "startsAt": started.isoformat().replace("+00:00", "Z"),
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "",
        "fingerprint": fingerprint,
    }
    return {
        "version": "4",
        "groupKey": f"{{}}:{{alertname={name!r}}}",
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "drkit",
        "groupLabels": {"alertname": name},
        "commonLabels": labels,
        "commonAnnotations": alert["annotations"],
        "externalURL": "",
        "alerts": [alert],
    }


def _post(url: str, body: bytes, timeout_s: float) -> None:
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    # The config admits only http(s) URLs (WebhookConfig.url).
    with urllib.request.urlopen(request, timeout=timeout_s) as reply:
        reply.read()


class Notifier:
    """Sends events to the configured webhooks; calling it never raises or blocks."""

    def __init__(
        self,
        webhooks: tuple[WebhookConfig, ...],
        post: Callable[[str, bytes, float], None] = _post,
        background: bool = True,
    ) -> None:
        self.webhooks = webhooks
        self._post = retry(
            stop=stop_after_attempt(3), wait=wait_exponential(multiplier=0.5, max=4), reraise=True
        )(post)
        self.background = background

    def __call__(
        self,
        event: NotificationEvent,
        source: str,
        target: str,
        detail: Mapping[str, Any],
        run_id: int | None = None,
        summary: str = "",
    ) -> None:
        for hook in self.webhooks:
            if event not in hook.events:
                continue
            body = alertmanager_body(
                event, source, target, summary or event.value.replace("_", " "), detail, run_id
            )
            payload = json.dumps(body).encode()
            if self.background:
                threading.Thread(
                    target=self._deliver, args=(hook, event, payload), daemon=True,
                    name=f"webhook {event.value}",
                ).start()  # fmt: skip
            else:
                self._deliver(hook, event, payload)

    def _deliver(self, hook: WebhookConfig, event: NotificationEvent, payload: bytes) -> None:
        try:
            self._post(hook.url.get_secret_value(), payload, hook.timeout_s)
        except Exception as err:  # a webhook must never break a failover or the monitor
            _FAILED.labels(event.value).inc()
            log.error(
                "webhook notification failed",
                extra={
                    "event": event.value,
                    "host": urlsplit(hook.url.get_secret_value()).hostname,
                    "error": type(err).__name__,
                },
            )
