"""Consumer-group offsets across clusters: checkpoints, mapping loading, group sync, lookup.

The pure translation core is :mod:`drkit.translation`; this package feeds it from Kafka and
writes its answers back (checkpoints, target group offsets).
"""
