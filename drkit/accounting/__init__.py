"""Accounting: prove on the records themselves that nothing was skipped, count every duplicate.

``spec`` gathers what to check (offset ranges, group positions) with drkit's Kafka adapter, and
``losses`` counts the records lost before replication; ``job`` is the Spark job's entry point and
``sparkjob`` its stages (self-contained: pyspark and the standard library only, so they also run
with ``spark-submit`` on a cluster); ``session`` builds a local SparkSession with Spark's own
Kafka connector; ``verify`` ties them together for ``drkit verify``.
"""
