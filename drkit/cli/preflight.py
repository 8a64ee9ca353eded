"""Start-up checks of the long-running commands (``drkit replicate``, ``drkit checkpoint``):
what their workers would otherwise retry for ever is told at start, in seconds."""

from __future__ import annotations

import logging
from functools import partial

from drkit.cli.context import say
from drkit.config.model import DrkitConfig, FlowConfig
from drkit.errors import UnreachableClusterError
from drkit.kafka.clients import ClusterEndpoint, not_answering
from drkit.kafka.interruptible import InFlight


def require_flows_answering(config: DrkitConfig, chosen: list[FlowConfig]) -> None:
    """Issue 45: a source or target that is down, refused or not Kafka is told at start, in
    seconds and one line naming the cluster and its address (exit 3) - the flows (and the
    checkpoint workers) retried for ever, and librdkafka's own errors were all the operator
    saw.  Every cluster is asked at
    once (drkit.kafka.clients.not_answering, as ``clusters check`` asks).  When some flows
    have both clusters answering, those run: each cluster that does not is a warning naming
    the flows that wait for it (they start once it answers, as after any outage)."""
    aliases = list(dict.fromkeys(a for flow in chosen for a in (flow.source, flow.target)))
    asked = {
        alias: InFlight(partial(not_answering, ClusterEndpoint(alias, config.clusters[alias])))
        for alias in aliases
    }
    down = {
        alias: UnreachableClusterError(alias, config.clusters[alias].bootstrap_servers, why)
        for alias, check in asked.items()
        if (why := check.wait()) is not None
    }
    if not down:
        return
    runnable = [f.name for f in chosen if f.source not in down and f.target not in down]
    if not runnable:
        raise next(iter(down.values()))  # the first flow's source first: one line
    for alias, error in down.items():
        waiting = [f.name for f in chosen if alias in (f.source, f.target)]
        say(f"{error}: {', '.join(waiting)} wait for it; replicating {', '.join(runnable)}",
            logging.WARNING, cluster=alias)  # fmt: skip
