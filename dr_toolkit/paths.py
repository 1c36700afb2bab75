"""Local path helpers shared by the layers above (the filesystems, the fence): no I/O beyond
``os.path``, no dependency on any other module of the library."""

from __future__ import annotations

import os
import posixpath


def real_path(path: str) -> str:
    """The resolved real path of a local path that may not exist yet (its nearest existing
    ancestor resolved, the rest appended)."""
    p = path.rstrip("/") or "/"
    tail: list[str] = []
    while p not in ("", "/") and not os.path.exists(p):
        p, name = posixpath.split(p)
        tail.insert(0, name)
    return posixpath.join(os.path.realpath(p or "/"), *tail).rstrip("/") or "/"
