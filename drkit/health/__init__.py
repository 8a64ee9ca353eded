"""Health monitoring: probes (I/O), evaluation (pure), quorum of observers, the monitor process.

``evaluation`` turns a snapshot of recent probe results into a state per cluster (HEALTHY,
DEGRADED, UNAVAILABLE) with thresholds and hysteresis; ``quorum`` combines several observers'
states; ``group_lag`` is the Burrow-style consumer-group status; ``readiness`` judges the
failover bounds on what the probes measured (drkit.lag's figures, as the failover plan judges
them).  All four are pure.  ``probes`` measures a cluster or a flow; a flow's probe is the
checks of ``flow_checks``, each measuring the fields of ``observations.FlowObservation`` it
owns - fields declared once, with what the metrics, readiness and status need of them.
"""
