"""The only package that imports confluent_kafka.

It builds clients from :class:`drkit.config.ClusterConfig`, turns librdkafka errors into drkit's
exceptions, unwraps admin futures with deadlines and hands out plain value objects, so the rest of
drkit never sees a ``confluent_kafka`` type.
"""

from drkit.kafka.admin import GroupOffsets, KafkaAdmin, PartitionInfo, TopicInfo
from drkit.kafka.clients import (
    ClusterEndpoint,
    client_settings,
    make_consumer,
    make_producer,
    set_client_log_level,
)

__all__ = [
    "ClusterEndpoint",
    "GroupOffsets",
    "KafkaAdmin",
    "PartitionInfo",
    "TopicInfo",
    "client_settings",
    "make_consumer",
    "make_producer",
    "set_client_log_level",
]
