"""Adoption: start drkit from an existing MirrorMaker 2 deployment - its configuration
(``mm2_config``) and the flows it replicated so far (``adopt``, without copying them again)."""
