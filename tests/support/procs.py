"""Server processes for tests: the embedded default's launchers (dr_toolkit.embedded.services)."""

from dr_toolkit.embedded.services import ALL_SERVERS, ManagedProcess, free_port, port_open

__all__ = ["ALL_SERVERS", "ManagedProcess", "free_port", "port_open"]
