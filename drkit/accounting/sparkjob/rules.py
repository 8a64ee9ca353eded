"""drkit's record rules, restated for the job (it cannot import drkit).

Each rule is held equal to its original by a hypothesis test (tests/unit/test_accounting_spec.py
for the filter, tests/unit/test_accounting_rules.py for the loop rule), so the two never drift.
"""

from __future__ import annotations

import re
from typing import Any


def dropped_by_filters(
    filters: list[dict[str, Any]], key: bytes | None, headers: list[tuple[str, bytes | None]]
) -> bool:
    """Whether the flow's filter transforms drop this record.

    The same rule as the ``filter`` transform (drkit/topology/transforms.py): a rule matches
    when its ``key_regex`` finds a match in the key and, if it names a ``header``, some value
    of that header matches ``header_regex``; an ``action: drop`` rule drops matching records,
    ``action: keep`` drops the others.
    """
    for rule in filters:
        matches = True
        if rule.get("key_regex") is not None:
            matches = re.search(str(rule["key_regex"]).encode(), key or b"") is not None
        if matches and rule.get("header") is not None:
            pattern = re.compile(str(rule.get("header_regex") or ".*").encode())
            matches = any(
                pattern.search(value or b"") for name, value in headers if name == rule["header"]
            )
        if matches == (rule.get("action", "drop") == "drop"):
            return True
    return False


def _src_topic(src: bytes | None) -> str | None:
    """The topic named by a ``drkit-src`` value (``cluster/topic/partition/offset``), or None
    when there is none or it is malformed."""
    if src is None:
        return None
    try:
        parts = src.decode("ascii").split("/")
    except UnicodeDecodeError:
        return None
    if len(parts) != 4 or not all(re.fullmatch(r"-?[0-9]+", p) for p in parts[2:]):
        return None
    return parts[1]


def origin_of_record(
    raw: bytes | None, cluster_id: str, topic: str, src: bytes | None = None
) -> str:
    """The origin cluster id of a record read from ``topic`` on cluster ``cluster_id``.

    The rule of drkit/replication/provenance.py: ``drkit-origin`` is ``<origin id>/<written-to
    cluster id>/<written-to topic>``.  A drkit copy sitting where drkit wrote it keeps its
    recorded origin; anything else - no header, a header an application forwarded into another
    topic, a malformed value - originates here.  A legacy value (a bare cluster id) counts as a
    copy in place unless the record's ``drkit-src`` (``src``) names another topic.
    """
    if raw is None:
        return cluster_id
    try:
        parts = raw.decode("ascii").split("/")
    except UnicodeDecodeError:
        return cluster_id
    if len(parts) == 1 and parts[0]:
        named = _src_topic(src)
        return parts[0] if named is None or named == topic else cluster_id
    if len(parts) == 3 and all(parts):
        return parts[0] if (parts[1], parts[2]) == (cluster_id, topic) else cluster_id
    return cluster_id


def is_loop(
    raw: bytes | None,
    cluster_id: str,
    topic: str,
    target_cluster_id: str,
    src: bytes | None = None,
) -> bool:
    """Whether a source record is a true loop: replicating it would send it back home."""
    return origin_of_record(raw, cluster_id, topic, src) == target_cluster_id


def loop_column(
    raw: Any, topic: Any, cluster_id: str, target_cluster_id: str, src: Any = None
) -> Any:
    """:func:`is_loop` as a Spark Column (no Python UDF: it runs for every source record).

    ``raw`` is the binary ``drkit-origin`` value (null without one), ``topic`` the record's
    topic, ``src`` the binary ``drkit-src`` value (null without one); a unit test evaluates it
    in Spark against :func:`is_loop` on every shape of value.
    """
    from pyspark.sql import functions as F

    def ascii_only(column: Any) -> Any:
        # Checked on the bytes (a cast to string would mangle invalid UTF-8).
        return F.hex(column).rlike("^([0-7][0-9A-F])*$")

    text = raw.cast("string")
    parts = F.split(text, "/", -1)
    # F.get is null past the end (indexing would raise under ANSI mode).
    first, second, third = F.get(parts, 0), F.get(parts, 1), F.get(parts, 2)
    here = F.lit(cluster_id)
    if src is None:
        src = F.lit(None).cast("binary")
    src_parts = F.split(src.cast("string"), "/", -1)
    src_valid = (
        src.isNotNull()
        & ascii_only(src)
        & (F.size(src_parts) == 4)
        & F.get(src_parts, 2).rlike("^-?[0-9]+$")
        & F.get(src_parts, 3).rlike("^-?[0-9]+$")
    )
    legacy_copy = ~src_valid | (F.get(src_parts, 1) == topic)
    origin = (
        F.when(raw.isNull() | ~ascii_only(raw), here)
        .when((F.size(parts) == 1) & (text != ""), F.when(legacy_copy, text).otherwise(here))
        .when(
            (F.size(parts) == 3) & (first != "") & (second != "") & (third != ""),
            F.when((second == here) & (third == topic), first).otherwise(here),
        )
        .otherwise(here)
    )
    return origin == F.lit(target_cluster_id)
