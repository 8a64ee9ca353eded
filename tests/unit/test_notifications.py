"""Webhook notifications: Alertmanager's body, delivered over real HTTP, retried, never raising."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from drkit.config.model import NotificationEvent, WebhookConfig
from drkit.notifications import Notifier, alertmanager_body
from tests.webhook_receiver import WebhookReceiver


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    found = WebhookReceiver(fail_first=1)
    yield found
    found.server.shutdown()


def test_the_body_is_an_alertmanager_webhook() -> None:
    body = alertmanager_body(
        NotificationEvent.FAILOVER_STARTED, "dc1", "dc2", "failing over", {"rpo": 0}, 7, 0.0
    )
    assert body["version"] == "4" and body["status"] == "firing"
    (alert,) = body["alerts"]
    assert alert["labels"] == {
        "alertname": "DrkitFailoverStarted",
        "event": "failover_started",
        "severity": "critical",
        "source": "dc1",
        "target": "dc2",
        "run": "7",
    }
    assert alert["annotations"]["summary"] == "failing over"
    assert json.loads(alert["annotations"]["detail"]) == {"rpo": 0}
    assert alert["startsAt"] == "1970-01-01T00:00:00Z"
    assert body["commonLabels"] == alert["labels"]


def test_delivered_after_a_failed_attempt_only_for_subscribed_events(
    receiver: WebhookReceiver,
) -> None:
    hook = WebhookConfig(url=SecretStr(receiver.url), events=(NotificationEvent.DIVERGENCE,))
    notify = Notifier((hook,), background=False)
    notify(NotificationEvent.DECISION, "dc1", "dc2", {})  # not subscribed
    notify(NotificationEvent.DIVERGENCE, "dc1", "dc2", {"records": 30}, 4, "dc1 is back")
    assert receiver.attempts == 2  # one 500, then delivered
    (body,) = receiver.bodies
    assert body["alerts"][0]["labels"]["alertname"] == "DrkitDivergence"


def test_an_unreachable_webhook_never_raises_and_is_logged_without_its_url(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hook = WebhookConfig(url=SecretStr("http://127.0.0.1:9/hook?token=secret"), timeout_s=0.5)
    notify = Notifier((hook,), background=False)
    notify(NotificationEvent.BLOCKED, "dc1", "dc2", {})
    (record,) = [r for r in caplog.records if r.message == "webhook notification failed"]
    assert record.host == "127.0.0.1"  # type: ignore[attr-defined]
    assert "secret" not in caplog.text
