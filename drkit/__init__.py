"""drkit: disaster-recovery failover orchestrator for Apache Kafka."""

__version__ = "0.1.0"
