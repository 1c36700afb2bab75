"""Server processes for tests: the shared launcher (drt_servers); processes seen through /proc."""

from pathlib import Path

from drt_servers.process import ALL_SERVERS, ManagedProcess, free_port, port_open

__all__ = ["ALL_SERVERS", "ManagedProcess", "children", "free_port", "port_open"]


def children(parents: set[int], marker: bytes) -> list[int]:
    """PIDs of the processes whose parent is one of ``parents`` and whose command line holds ``marker`` (Linux)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid in parents and marker in (d / "cmdline").read_bytes():
                out.append(int(d.name))
        except (OSError, ValueError, IndexError):
            continue
    return sorted(out)
