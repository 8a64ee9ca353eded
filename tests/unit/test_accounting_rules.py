"""The Spark job restates drkit's loop rule (it runs without drkit): held equal here."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drkit.accounting.sparkjob import rules
from drkit.replication import provenance

_IDS = ["S", "T", "X"]
_TOPICS = ["orders", "dc1.orders"]
# Pieces of drkit-origin values: cluster ids, topics, empty parts, non-ASCII and invalid UTF-8.
_PIECES = [b"S", b"T", b"X", b"orders", b"dc1.orders", b"", "é".encode(), b"\xff"]


# drkit-src values: valid ones naming either topic, and malformed ones.
_SRCS = [
    None,
    b"dc1/orders/0/7",
    b"dc1/dc1.orders/3/12",
    b"dc1/orders/x/7",
    b"dc1/orders/0",
    b"dc1/orders/ 1/2",
    "dc1/ordérs/0/1".encode(),
    b"\xff/orders/0/1",
]


@given(
    raw=st.one_of(
        st.none(),
        st.binary(max_size=12),
        st.lists(st.sampled_from(_PIECES), min_size=1, max_size=4).map(b"/".join),
    ),
    cluster_id=st.sampled_from(_IDS),
    topic=st.sampled_from(_TOPICS),
    target=st.sampled_from(_IDS),
    src=st.one_of(st.sampled_from(_SRCS), st.binary(max_size=16)),
)
def test_the_jobs_loop_rule_is_the_replicators(
    raw: bytes | None, cluster_id: str, topic: str, target: str, src: bytes | None
) -> None:
    assert rules.origin_of_record(raw, cluster_id, topic, src) == provenance.origin_of_record(
        raw, cluster_id, topic, src
    )
    assert rules.is_loop(raw, cluster_id, topic, target, src) is provenance.is_loop(
        raw, cluster_id, topic, target, src
    )


def _every_shape() -> Iterator[bytes | None]:
    yield None
    for size in (1, 2, 3, 4):
        for pieces in itertools.product(_PIECES, repeat=size):
            if size == 4 and pieces[0] != b"T":
                continue  # four parts are malformed whatever they hold: a sample suffices
            yield b"/".join(pieces)


@pytest.mark.spark
def test_the_jobs_spark_column_decides_as_the_rule_on_every_shape_of_value() -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    rows = [(raw, topic, src) for raw in _every_shape() for topic in _TOPICS for src in _SRCS]
    pairs = [(here, target) for here in ("S", "T") for target in ("S", "T", "X")]
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("drkit loop rule")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    try:
        frame = spark.createDataFrame(rows, "raw binary, topic string, src binary")
        decided = frame.select(
            "raw",
            "topic",
            "src",
            *(
                rules.loop_column(F.col("raw"), F.col("topic"), here, target, F.col("src")).alias(
                    f"{here}{target}"
                )
                for here, target in pairs
            ),
        ).collect()
    finally:
        spark.stop()
    assert len(decided) == len(rows) > 1000
    for row in decided:
        raw = None if row["raw"] is None else bytes(row["raw"])
        src = None if row["src"] is None else bytes(row["src"])
        for here, target in pairs:
            expected = rules.is_loop(raw, here, row["topic"], target, src)
            assert row[f"{here}{target}"] is expected, (raw, row["topic"], src, here, target)
