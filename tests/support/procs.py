"""Server processes for tests: the embedded default's launchers (drt_demo.services)."""

from drt_demo.services import ALL_SERVERS, ManagedProcess, free_port, port_open

__all__ = ["ALL_SERVERS", "ManagedProcess", "free_port", "port_open"]
