"""What a copy is asked to do: one value, built once at every front door.

:class:`CopyRequest` holds what one `distcp` run (or one run per source, DistCp's ``SRC1 SRC2 …
DST``) is asked: the source(s), the target, the :class:`~dr_toolkit.topology.CopyOptions`, a dry
run, the policy it runs for, ``-diff``/``-rdiff``, the fencing epoch of the runbook's final copy,
and the hooks of the caller (``progress``, ``cancel``). What it does not hold is where it runs: the
credentials (``access``), the topology and the ledger are the caller's, passed beside it
(:func:`dr_toolkit.copy.api.distcp`).

- ``drt distcp SRC… DST`` builds it from its options (:mod:`dr_toolkit.cli.distcp`);
- a policy (``drt replicate``, the Airflow DAGs, the runbook's final copy) through
  :func:`dr_toolkit.copy.api.replicate_policy`, which builds one per target;
- tests and benchmarks build their own.

``open_fs`` is the seam that opens the source's and the target's filesystems (and the ``-log``
directory's): :func:`dr_toolkit.fs.open_fs` unless a test passes its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from dr_toolkit.access import Access
from dr_toolkit.fs import open_fs
from dr_toolkit.fs.base import FileSystem
from dr_toolkit.fs.uri import Location
from dr_toolkit.topology import CopyOptions

#: progress(kind, n): kind is "plan" (n = bytes to copy), "bytes" (n bytes sent) or "file" (n = 1)
Progress = Callable[[str, int], None]
#: how a run opens the filesystem of a location (the source, the target, the -log directory)
Opener = Callable[[Location, Access], FileSystem]


@dataclass(frozen=True)
class CopyRequest:
    """One copy, as asked (see the module doc).

    ``diff=(S1, S2)``: DistCp ``-diff S1 S2``; ``rdiff=(S2, S1)``: DistCp ``-rdiff S2 S1`` (both
    with ``options.update``). ``more_sources``: the sources after the first (DistCp ``SRC1 SRC2 …
    DST``: each is copied to ``target/<its name>``, :func:`dr_toolkit.copy.api.distcp_sources`).
    ``fence_epoch``: the fencing epoch the runbook's final copy holds (a run into a fenced hot
    cluster's cold side is refused without it)."""

    source: str
    target: str
    options: CopyOptions = field(default_factory=CopyOptions)
    dry_run: bool = False
    policy: str | None = None
    progress: Progress | None = None
    cancel: threading.Event | None = None
    spark_master: str | None = None
    fence_epoch: int | None = None
    diff: tuple[str, str] | None = None
    rdiff: tuple[str, str] | None = None
    more_sources: tuple[str, ...] = ()
    open_fs: Opener = open_fs

    @property
    def sources(self) -> tuple[str, ...]:
        return (self.source, *self.more_sources)

    def to(self, source: str, target: str) -> CopyRequest:
        """The same request for one of its sources, into ``target``."""
        return replace(self, source=source, target=target, more_sources=())
