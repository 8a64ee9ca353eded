"""Accounting: prove on the records themselves that nothing was skipped, count every duplicate.

``spec`` gathers what to check (offset ranges, group positions) with drkit's Kafka adapter;
``job`` is the Spark job (self-contained: pyspark and the standard library only, so it also runs
with ``spark-submit`` on a cluster); ``session`` builds a local SparkSession with Spark's own Kafka
connector; ``verify`` ties them together for ``drkit verify``.
"""
