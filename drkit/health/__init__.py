"""Health monitoring: probes (I/O), evaluation (pure), quorum of observers, the monitor process.

``evaluation`` turns a snapshot of recent probe results into a state per cluster (HEALTHY,
DEGRADED, UNAVAILABLE) with thresholds and hysteresis; ``quorum`` combines several observers'
states; ``group_lag`` is the Burrow-style consumer-group status.  All three are pure and are what
the failover engine will consult.
"""
