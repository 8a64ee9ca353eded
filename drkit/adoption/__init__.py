"""Adoption: start drkit from an existing MirrorMaker 2 deployment (its configuration today;
continuing its replicated flows is coming)."""
