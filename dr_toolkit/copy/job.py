"""One group of files copied in another process — a Spark executor
(:mod:`dr_toolkit.copy.spark_engine`) or a local copy process (:mod:`dr_toolkit.copy.processes`):
:class:`CopyJob` holds what that process needs to rebuild both filesystems and runs
:func:`dr_toolkit.copy.execute.copy_one` per file (the same commit protocol as the thread pool),
with the run's fencing marker checked on the target before every destructive step."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from dr_toolkit.copy.execute import Cancelled, CopyContext, Outcome, Throttle, copy_one
from dr_toolkit.copy.plan import FileTask
from dr_toolkit.copy.state import Fence, LeaseLost
from dr_toolkit.fs import open_fs_credentials
from dr_toolkit.fs.uri import Location
from dr_toolkit.secrets import Credentials

FENCED = "fenced"  # a process's row for a file it left alone: the run's fencing token was taken


@dataclass
class CopyJob:
    """Everything a process needs to rebuild the filesystems and copy a group of files: pickled
    with the group, credentials inside (never in a Spark conf, a log or a command line)."""

    src: Location
    tgt: Location
    src_root: str
    tgt_root: str
    run_id: str
    preserve: tuple[str, ...]
    bytes_per_s: float | None
    stable_source: bool
    src_credentials: Credentials | None = None
    tgt_credentials: Credentials | None = None
    live_root: str | None = None  # the live source root when src_root is a snapshot of it
    fence: Fence | None = None  # the run's fencing token: checked before every destructive step
    proof: str = "checksum"  # CopyOptions.proof: "content" reads every written file back

    def __call__(self, tasks: Iterable[FileTask], cancel: threading.Event | None = None
                 ) -> Iterator[dict[str, Any]]:
        """Copy ``tasks``, one row (:meth:`Outcome.to_dict`) each; ``cancel`` set: stop before the
        next file (Cancelled)."""
        tfs = open_fs_credentials(self.tgt, self.tgt_credentials)
        if tfs.kind == "local":
            tfs.confine = self.tgt_root  # type: ignore[attr-defined]  # the target's real path (see listing.resolve)
        fence = self.fence
        ctx = CopyContext(open_fs_credentials(self.src, self.src_credentials), tfs,
                          self.src_root, self.tgt_root, self.run_id, self.preserve, Throttle(self.bytes_per_s),
                          stable_source=self.stable_source, live_root=self.live_root,
                          cancel=cancel if cancel is not None else threading.Event(),
                          fence=(lambda: fence.check(tfs)) if fence is not None else None, proof=self.proof)
        lost: str | None = None
        for t in tasks:
            if ctx.cancel.is_set():
                raise Cancelled("the run was interrupted")
            if lost is None:
                try:
                    yield copy_one(ctx, t).to_dict()
                    continue
                except LeaseLost as exc:  # another run took the target: nothing more is placed by this group
                    lost = str(exc)
            yield {**Outcome(t.rel, False, error=lost).to_dict(), FENCED: True}


def outcomes(rows: Iterable[dict[str, Any]]) -> list[Outcome]:
    """The rows as outcomes; LeaseLost when a process found the target taken by another run (its
    files left alone): the run stops, exit 1."""
    rows = list(rows)
    fenced = [r for r in rows if r.pop(FENCED, False)]
    if fenced:
        raise LeaseLost(f"{fenced[0]['error']} ({len(fenced)} files left to the run that took it)")
    return [Outcome(**r) for r in rows]
