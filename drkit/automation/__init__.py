"""Health-triggered failover: the pure decision, its audit trail and the monitor's runner."""
