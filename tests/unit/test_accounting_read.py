"""Parts of the accounting job that need no Kafka.

The header lookup (drkit/accounting/sparkjob/read.py ``header_value``) on every shape of header
list: its fast path (the last two entries) must answer as a search of the whole list.  The
shuffle sizing of the join (sparkjob/accounting.py ``shuffle_partitions``).
"""

from __future__ import annotations

import itertools

import pytest

from drkit.accounting.sparkjob.read import SOURCE_HEADER, header_value

Headers = list[tuple[str, bytes | None]] | None

_ENTRIES: list[tuple[str, bytes | None]] = [
    (SOURCE_HEADER, b"dc1/orders/0/7"),
    (SOURCE_HEADER, b"dc1/orders/0/8"),
    (SOURCE_HEADER, None),
    ("drkit-origin", b"S/T/dc1.orders"),
    ("trace", b"abc"),
    ("trace", None),
]


def _every_list() -> list[Headers]:
    lists: list[Headers] = [None]
    for size in range(5):
        lists.extend(list(pick) for pick in itertools.product(_ENTRIES, repeat=size))
    return lists


def _last_value(headers: Headers, name: str) -> bytes | None:
    found = [value for key, value in headers or [] if key == name]
    return found[-1] if found else None


@pytest.mark.spark
def test_header_value_is_the_last_value_of_its_name_in_any_list() -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    lists = _every_list()
    spark = (
        SparkSession.builder.master("local[1]")
        .appName("drkit header lookup")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    try:
        frame = spark.createDataFrame(
            [(i, h) for i, h in enumerate(lists)],
            "i int, headers array<struct<key:string,value:binary>>",
        )
        found = frame.select(
            "i", header_value(F.col("headers"), SOURCE_HEADER).alias("value")
        ).collect()
    finally:
        spark.stop()
    assert len(found) == len(lists) > 1000
    for row in found:
        value = None if row["value"] is None else bytes(row["value"])
        assert value == _last_value(lists[row["i"]], SOURCE_HEADER), lists[row["i"]]


def test_shuffle_partitions_grow_with_the_records_and_never_fall_below_the_session() -> None:
    from drkit.accounting.sparkjob.accounting import shuffle_partitions

    assert shuffle_partitions(10_000_000, 16) == 16  # the session's setting suffices
    assert shuffle_partitions(0, 16) == 16
    assert shuffle_partitions(100_000_000, 16) == 100  # one partition per million records
    assert shuffle_partitions(100_000_001, 16) == 101
    assert shuffle_partitions(5_000_000, 200) == 200  # a user's larger setting is kept
