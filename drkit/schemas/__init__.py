"""Schemas on the standby: a flow's source registry copied to its target's, ids kept, and the
registries' modes switched by a failover (docs/schemas.md)."""
