"""``drkit demo``: the main job on the embedded local default.

Brings up dc1 and dc2 (if needed), writes records to dc1, replicates them to dc2 and shows
them consumed on both sides.
"""

from __future__ import annotations

import time
import uuid

import click

from drkit.cli.context import AppContext, pass_app
from drkit.kafka import ClusterEndpoint, KafkaAdmin
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import consume_all, produce_batch
from drkit.local import LocalKafka


@click.command("demo")
@click.option(
    "--records", type=int, default=1000, show_default=True, help="Records to write to dc1."
)
@pass_app
def demo(app: AppContext, records: int) -> None:
    """Start local dc1/dc2 and show records produced and consumed on both clusters."""
    from drkit.local.config_writer import write_local_config

    started = time.monotonic()
    statuses = LocalKafka(app.state_dir).up(["dc1", "dc2"])
    write_local_config(app.state_dir, statuses)
    click.echo(f"clusters up in {time.monotonic() - started:.1f}s")
    topic = f"demo.orders.{uuid.uuid4().hex[:6]}"
    for status in statuses:
        endpoint = ClusterEndpoint.plain(status.name, status.bootstrap_servers)
        KafkaAdmin(endpoint).create_topics([TopicSpec(topic, 3)])
        payload = [(f"k{i}".encode(), f"{status.name}-{i}".encode()) for i in range(records)]
        produce_batch(endpoint, topic, payload)
        got = consume_all(endpoint, topic, expected=records, timeout_s=30)
        click.echo(f"{status.name}: produced {records} and consumed {len(got)} on {topic}")


COMMANDS = [demo]
