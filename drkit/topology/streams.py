"""Kafka Streams applications in a flow (``flows[].kafka_streams``: their application ids).

A Streams application keeps two kinds of internal topics, named ``<application.id>-<name>-...``:

* **changelogs** (``...-changelog``): the durable copy of its state stores.  They are replicated
  and keep their names on the target (identity naming, whatever the flow's policy), because the
  application started on the target with the same ``application.id`` looks for exactly these
  names to rebuild its state;
* **repartition topics** (``...-repartition``, and the foreign-key join's subscription topics,
  ``...-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic`` and its ``RESPONSE`` twin,
  or ``...-<name>-subscription-registration-topic`` when named): transient
  hand-overs between its sub-topologies, purged as they are consumed.  They are never
  replicated; the application on the target creates them anew (docs/kafka-streams.md says what
  that costs at a failover).

Pure: names in, a kind out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum

_FOREIGN_KEY_JOIN = re.compile(r"subscription-(registration|response)(-\d+)?-topic$", re.I)


class StreamsTopic(StrEnum):
    CHANGELOG = "changelog"
    REPARTITION = "repartition"


def streams_topic(topic: str, applications: Iterable[str]) -> StreamsTopic | None:
    """What ``topic`` is to one of the ``applications`` (None: not one of their internals)."""
    for application in applications:
        if not topic.startswith(f"{application}-"):
            continue
        if topic.endswith("-changelog"):
            return StreamsTopic.CHANGELOG
        if topic.endswith("-repartition") or _FOREIGN_KEY_JOIN.search(topic):
            return StreamsTopic.REPARTITION
    return None
