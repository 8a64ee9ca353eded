"""``drkit demo``: drkit's main job on the embedded local default.

Brings up dc1 and dc2 (if needed), writes orders to dc1, lets an application group consume part
of them, replicates dc1 -> dc2 with checkpoints, then shows where that group must resume on dc2
- checked record by record through the provenance headers - and finally proves the copy with
the Spark accounting job (every record once, none missing, the group's position exact).
"""

from __future__ import annotations

import threading
import time

import click

from drkit.cli.context import AppContext, pass_app
from drkit.config import load_config
from drkit.config.model import DrkitConfig
from drkit.kafka import ClusterEndpoint, KafkaAdmin, TopicPartition
from drkit.kafka.admin import TopicSpec
from drkit.kafka.io import commit_group_offsets, produce_batch
from drkit.local import LocalKafka
from drkit.offsets.lookup import translate_groups
from drkit.replication.client_settings import WorkerSettings
from drkit.replication.service import ServiceOptions, run_flows
from drkit.store import StateStore, database_url

TOPIC = "demo.orders"
GROUP = "demo-billing"


@click.command("demo")
@click.option(
    "--records", type=int, default=20_000, show_default=True, help="Records to write to dc1."
)
@click.option(
    "--timeout",
    type=float,
    default=120.0,
    show_default=True,
    help="Seconds to wait for replication and checkpoints.",
)
@click.option(
    "--skip-verify",
    is_flag=True,
    help="Leave out the last step, the Spark accounting run (saves ~30 s).",
)
@pass_app
def demo(app: AppContext, records: int, timeout: float, skip_verify: bool) -> None:
    """Replicate dc1 -> dc2 locally, translate a consumer group exactly, prove it with Spark."""
    from drkit.local.config_writer import write_local_config

    started = time.monotonic()
    statuses = LocalKafka(app.state_dir).up(["dc1", "dc2"])
    config_path = write_local_config(app.state_dir, statuses)
    config = load_config(config_path)
    click.echo(f"1. dc1 and dc2 up in {time.monotonic() - started:.1f}s (config {config_path})")

    dc1 = ClusterEndpoint("dc1", config.clusters["dc1"])
    dc2 = KafkaAdmin(ClusterEndpoint("dc2", config.clusters["dc2"]))
    KafkaAdmin(dc1).create_topics([TopicSpec(TOPIC, 6)])
    produce_batch(
        dc1, TOPIC, ((f"order-{i}".encode(), f'{{"n": {i}}}'.encode()) for i in range(records))
    )
    ends = KafkaAdmin(dc1).topic_offsets(TOPIC)
    # The "billing" application has processed about two thirds of every partition.
    committed = {p: (2 * end) // 3 for p, (_, end) in ends.items()}
    commit_group_offsets(dc1, GROUP, {TopicPartition(TOPIC, p): o for p, o in committed.items()})
    total = sum(end for _, end in ends.values())
    click.echo(
        f"2. wrote {records} records to dc1/{TOPIC}; group {GROUP} committed "
        f"{sum(committed.values())} of {total}"
    )

    stop = threading.Event()
    options = ServiceOptions(settings=WorkerSettings(worker_id="demo", commit_interval_s=0.5))
    runner = threading.Thread(target=run_flows, args=(config, options, stop), daemon=True)
    runner.start()
    replica = f"dc1.{TOPIC}"
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if replica in dc2.list_topics():
                copied = sum(end for _, end in dc2.topic_offsets(replica).values())
                report = translate_groups(
                    config, config.flow("dc1->dc2"), [GROUP], use_checkpoints=True
                )
                rows = report.groups.get(GROUP, [])
                if (
                    copied >= total
                    and len(rows) == len(committed)
                    and all(r.source_offset == committed[r.source_partition] for r in rows)
                ):
                    break
            time.sleep(0.5)
        else:
            raise click.ClickException("replication or checkpoints did not complete in time")
    finally:
        stop.set()
        runner.join(60)
    click.echo(
        f"3. replicated {total} records to dc2/{replica} with checkpoints "
        f"({time.monotonic() - started:.1f}s so far)"
    )

    report = translate_groups(config, config.flow("dc1->dc2"), [GROUP], verify=True)
    click.echo(f"4. where {GROUP} resumes on dc2 (verified through provenance headers):")
    click.echo(f"   {'partition':>9} {'S (dc1)':>8} {'T (dc2)':>8} {'method':<7} re-reads  check")
    ok = True
    for row in report.groups[GROUP]:
        ok &= bool(row.verified) and row.expected_rereads == 0
        click.echo(
            f"   {row.source_partition:>9} {row.source_offset:>8} {row.target_offset:>8} "
            f"{row.method:<7} {row.expected_rereads:>8}  "
            f"{'ok' if row.verified else 'MISMATCH'}"
        )
    if not ok:
        raise click.ClickException("translation check failed")
    if not skip_verify:
        _prove(app, config, started)
    click.echo(
        f"done in {time.monotonic() - started:.1f}s: 0 records skipped, 0 re-read. "
        "Clusters keep running ('drkit local down' stops them)."
    )


def _prove(app: AppContext, config: DrkitConfig, started: float) -> None:
    """Step 5: the Spark accounting job over every record of the flow."""
    from drkit.accounting.verify import default_out, verify

    flow = config.flow("dc1->dc2")
    click.echo("5. proving it on the records with Spark (drkit verify) ...")
    store = StateStore(database_url(config, app.state_dir))
    store.ensure_current()
    summary = verify(config, flow, [GROUP], [TOPIC], default_out(app.state_dir, flow), None, store)
    totals = summary["totals"]
    exact = sum(1 for g in summary["groups"] if g["exact"])
    click.echo(
        f"   {totals['records']} records checked: {totals['replicated_once']} replicated once, "
        f"{totals['missing']} missing, {totals['duplicated_records']} duplicated; "
        f"{GROUP} exact on {exact} of {len(summary['groups'])} partitions "
        f"({summary['elapsed_s']:.0f}s, tables in {summary['output']})"
    )
    if not summary["ok"]:
        raise click.ClickException("the accounting job found missing or skipped records")


COMMANDS = [demo]
