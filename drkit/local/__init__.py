"""Real Apache Kafka clusters on loopback, from Maven Central jars (no Docker, no tarball).

``jars`` resolves and caches the broker, tools, MirrorMaker 2 and Spark-connector jars with Maven;
``cluster`` formats, starts, stops and kills KRaft combined-mode brokers and records their state in
the state directory so that every later ``drkit`` invocation sees them.
"""

from drkit.local.cluster import BrokerStatus, ClusterStatus, LocalKafka
from drkit.local.jars import KAFKA_VERSION, resolve_bundle

__all__ = ["KAFKA_VERSION", "BrokerStatus", "ClusterStatus", "LocalKafka", "resolve_bundle"]
