"""``drkit adopt``: continue a flow MirrorMaker 2 replicated so far (drkit.adoption.adopt)."""

from __future__ import annotations

import click

from drkit.adoption.adopt import Adopter, Adoption
from drkit.adoption.mm2_syncs import mm2_offset_syncs_topic
from drkit.cli.context import (
    TOPIC,
    AppContext,
    FiniteRange,
    complete_flows,
    config_option,
    echo_document,
    output_option,
    pass_app,
)
from drkit.config.loader import known_flow


@click.command("adopt")
@config_option
@click.option(
    "--flow",
    "flow_name",
    required=True,
    metavar="SRC->DST",
    shell_complete=complete_flows,
    help="The flow MirrorMaker 2 replicated (its cluster aliases must be MM2's).",
)
@click.option(
    "--mm2-syncs-topic",
    type=TOPIC,
    metavar="TOPIC",
    help="MirrorMaker 2's offset-syncs topic [default: mm2-offset-syncs.<DST>.internal].",
)
@click.option(
    "--mm2-syncs-on",
    type=click.Choice(["source", "target"]),
    default="source",
    show_default=True,
    help="The cluster holding it (MM2's offset-syncs.topic.location).",
)
@click.option(
    "--quiet",
    "quiet_s",
    type=FiniteRange(min=1.0, max=3600),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="How long MirrorMaker 2 must have written nothing before drkit takes over.",
)
@click.option("--dry-run", is_flag=True, help="Show what would be written; write nothing.")
@output_option
@pass_app
def adopt(
    app: AppContext,
    config_file: str | None,
    flow_name: str,
    mm2_syncs_topic: str | None,
    mm2_syncs_on: str,
    quiet_s: float,
    dry_run: bool,
    output: str,
) -> None:
    """Take over a flow MirrorMaker 2 replicated, copying nothing again.

    Stop MirrorMaker 2's flow first: adopt refuses (exit 4, nothing written) while it still
    writes, or when its traces are not where they are looked for (no offset-syncs topic).
    drkit then resumes each partition exactly where MM2 stopped; groups committed before that
    point translate at MM2's precision (rounded down, the re-reads shown in every plan),
    exactly from there on.  Runs with the clusters' own `security` (an operator's login).
    Then start `drkit replicate`."""
    from drkit.signing import Kind, Signer
    from drkit.store.flow_keys import keys_of

    config = app.config(config_file)
    flow = known_flow(config, flow_name, "--flow")
    from drkit.kafka import KafkaAdmin
    from drkit.kafka.clients import ClusterEndpoint, require_answering

    for alias in (flow.source, flow.target):  # hung, refused or not Kafka: told in seconds, not
        require_answering(ClusterEndpoint(alias, config.clusters[alias]))  # after the quiet wait
    store = app.store(config_file)
    store.ensure_current()
    adopter = Adopter(
        config,
        flow,
        mm2_syncs_topic or mm2_offset_syncs_topic(flow.target),
        mm2_syncs_on == "source",
        quiet_s,
        # the runs it writes are signed as the worker's are (drkit/signing.py)
        signer=Signer(keys_of(config, store)(flow.name), Kind.OFFSET_SYNC, flow.name),
        connect=KafkaAdmin,
    )
    if output == "text":
        click.echo(f"checking that MirrorMaker 2 wrote nothing to {flow.target} for {quiet_s:g}s")
    adoption = adopter.run(dry_run=dry_run)
    if output == "json":
        echo_document("adoption", adoption.as_json())
    else:
        click.echo(adoption_text(adoption))


def adoption_text(adoption: Adoption) -> str:
    lines = [
        f"{adoption.flow}: "
        + ("adopted" if adoption.written else "would adopt (dry run, nothing written)")
    ]
    for p in adoption.partitions:
        lines.append(
            f"  {p.source} -> {p.target}: resumes at {p.next_offset}; exact from {p.mm2.end} "
            f"({p.copied} records MM2 copied after its last sync, paired one by one); below "
            f"{p.mm2.end}: MirrorMaker 2 precision ({len(p.mm2.upstream)} sync points)"
        )
    if adoption.fresh:
        lines.append(f"  starts anew (nothing replicated): {', '.join(map(str, adoption.fresh))}")
    if adoption.ignored_topics:
        lines.append("  MM2 replicated, not in this flow: " + ", ".join(adoption.ignored_topics))
    lines += [f"  note: {note}" for note in adoption.notes]
    if adoption.written:
        lines.append("next: start `drkit replicate` for this flow (and keep MirrorMaker 2 off)")
    return "\n".join(lines)


COMMANDS = [adopt]
