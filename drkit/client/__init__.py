"""What applications import to follow drkit's active pointer (docs/client-pointer.md).

``drkit.client.pointer_record``: the pointer record's format, signature and epoch rule (pure;
the failover engine writes with it).  ``drkit.client.follow``: the watcher of the pointer
topic on every cluster and the producer and consumer that switch clusters when the pointer
moves (confluent-kafka).  This package imports nothing of drkit's beyond ``drkit.signing`` and
the pointer topic's name: an application never loads the CLI, the engine or the config model.
"""
