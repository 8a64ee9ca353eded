"""Deterministic simulation of drkit's control plane (see tests/simulation/scheduler.py)."""
