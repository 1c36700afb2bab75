"""Server processes for tests: the shared launcher (drt_servers)."""

from drt_servers.process import ALL_SERVERS, ManagedProcess, free_port, port_open

__all__ = ["ALL_SERVERS", "ManagedProcess", "free_port", "port_open"]
