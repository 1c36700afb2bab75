"""Coming back after a failover: re-protect (replication the other way), the divergence report
of what the old hot cluster took after the recovery point, and the planned switchover."""
