"""A cluster's ``client_overrides`` change drkit's tuning of every client, never what drkit's
guarantees rest on (drkit.kafka.clients' layers; reserved settings are refused at load)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from drkit.config.model import ClusterConfig, FlowConfig
from drkit.kafka.clients import ClusterEndpoint, client_settings, consumer_config, producer_config
from drkit.replication.client_settings import WorkerSettings, consumer_settings, producer_settings
from drkit.topology.flow import FlowTopology

TUNED: dict[str, str | int | float | bool] = {
    "linger.ms": 50,
    "compression.type": "zstd",
    "fetch.queue.backoff.ms": 100,
    "fetch.wait.max.ms": 200,
    "batch.num.messages": 10_000,
    "client.id": "quota-team-a",
}


def _endpoint(**overrides: str | int | float | bool) -> ClusterEndpoint:
    config = ClusterConfig(bootstrap_servers="127.0.0.1:1", client_overrides=overrides)
    return ClusterEndpoint("dc1", config)


def test_an_operators_overrides_win_over_drkits_tuning_of_every_client() -> None:
    """Failed before: drkit's producer and consumer defaults (and a replication worker's
    tuning) were applied after the overrides, so ``linger.ms``, compression, the fetch backoff
    and the client id (for quotas) could not be changed per cluster."""
    endpoint = _endpoint(**TUNED)
    producer = producer_config(endpoint)
    assert (producer["linger.ms"], producer["compression.type"]) == (50, "zstd")
    assert producer["client.id"] == "quota-team-a"
    assert consumer_config(endpoint, "g")["fetch.queue.backoff.ms"] == 100
    topology = FlowTopology.of(FlowConfig(source="dc1", target="dc2"))
    worker = WorkerSettings()
    chosen = consumer_settings(topology, worker)
    consumer = client_settings(endpoint, chosen.required, chosen.tuning)
    assert (consumer["fetch.wait.max.ms"], consumer["client.id"]) == (200, "quota-team-a")
    chosen = producer_settings(topology, worker, careful=False)
    producer = client_settings(endpoint, chosen.required, chosen.tuning)
    assert (producer["linger.ms"], producer["batch.num.messages"]) == (50, 10_000)


def test_what_a_client_requires_stays_whatever_the_tuning() -> None:
    endpoint = _endpoint(**TUNED)
    assert producer_config(endpoint)["acks"] == "all"
    assert producer_config(endpoint)["enable.idempotence"] is True
    assert producer_config(endpoint, {"enable.idempotence": False})["enable.idempotence"] is False
    consumer = consumer_config(endpoint, "g")
    assert (consumer["group.id"], consumer["enable.auto.commit"]) == ("g", False)
    topology = FlowTopology.of(FlowConfig(source="dc1", target="dc2", exactly_once=True))
    careful = producer_settings(topology, WorkerSettings(), careful=True)
    producer = client_settings(endpoint, careful.required, careful.tuning)
    assert (producer["batch.num.messages"], producer["linger.ms"]) == (1, 0)  # finding a bad record
    assert producer["transactional.id"] == topology.transactional_id("w0")
    chosen = consumer_settings(topology, WorkerSettings())
    consumer = client_settings(endpoint, chosen.required, chosen.tuning)
    assert (consumer["isolation.level"], consumer["auto.offset.reset"]) == (
        "read_committed",
        "error",
    )


@pytest.mark.parametrize("key", ["enable.auto.commit", "isolation.level", "acks"])
def test_an_override_of_a_setting_drkit_requires_is_refused_naming_why(key: str) -> None:
    with pytest.raises(ValidationError) as refused:
        _endpoint(**{key: "x"})
    assert f"{key} cannot be overridden: drkit sets it per client" in str(refused.value)
