"""Local to local on copy processes: :func:`run_processes` hands groups of files to processes
that each run :class:`dr_toolkit.copy.job.CopyJob` (:func:`main`), one pickled frame each way
over a pipe. A copy process is a plain interpreter started with ``python -c`` :data:`BOOT` and
the caller's module path — never a fork of the caller (whose threads may hold locks) and never a
re-import of the caller's ``__main__`` (as multiprocessing's spawn does).

In a copy process, SIGUSR1 asks it to stop (the file in hand is finished or removed, no other is
taken); Ctrl-C and SIGTERM are left to the parent, which sends SIGUSR1; on Linux the process is
killed when its parent dies, so no copy outlives a killed run.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

from dr_toolkit.copy.execute import Cancelled, Outcome, _batches, uniform_lists
from dr_toolkit.copy.job import CopyJob, outcomes
from dr_toolkit.copy.plan import FileTask

#: local to local, at least this many files before processes are started for them (a process
#: takes ~0.3 s to start and import the copy code)
PROCESS_MIN_FILES = 512


def run_processes(job: CopyJob, tasks: list[FileTask], processes: int, *, cancel: threading.Event,
                  check: Callable[[], None] | None = None, on_done: Callable[[Outcome], None] | None = None,
                  strategy: str = "dynamic") -> list[Outcome]:
    """Copy ``tasks`` local to local on ``processes`` copy processes
    (:func:`main`: a fresh interpreter each), the groups made as
    :func:`dr_toolkit.copy.execute.run_local` makes them and handed to whichever process is free.
    Each process runs :class:`CopyJob` on its group — the same
    :func:`dr_toolkit.copy.execute.copy_one` and commit protocol — and checks the
    run's fencing marker on the target before every rename; this process runs ``check`` (the
    lease on its own clock, and the marker) after each group, and stops the processes when
    ``cancel`` is set or a check fails: each finishes or removes the file in hand and takes no
    other. Measured on 2 cores: ``git show c7ce6e0:benchmarks/README.md`` ("Local copies on processes")."""
    import json
    import queue
    import subprocess
    from collections import deque

    if not tasks:
        return []
    groups = deque(uniform_lists(tasks, processes) if strategy == "uniformsize" else _batches(tasks))
    lock = threading.Lock()
    replies: queue.Queue[tuple[str, Any]] = queue.Queue()
    stopping = threading.Event()
    # this interpreter's module path (as multiprocessing's spawn passes it), so the process runs
    # this very dr_toolkit
    argv = [sys.executable, "-c", BOOT, json.dumps(sys.path), str(os.getpid())]
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
             for _ in range(max(1, min(processes, len(groups))))]

    def feed(p: subprocess.Popen[bytes]) -> None:
        assert p.stdin is not None and p.stdout is not None
        try:
            while not stopping.is_set():
                with lock:
                    if not groups:
                        break
                    g = groups.popleft()
                send(p.stdin, (job, g))
                replies.put(receive(p.stdout))
        except (EOFError, OSError) as exc:
            code = p.poll()
            replies.put(("error", OSError(f"a copy process ended (exit {code}): {exc}")))
        finally:
            replies.put(("done", None))
            try:
                p.stdin.close()
            except OSError:
                pass

    feeders = [threading.Thread(target=feed, args=(p,), name=f"drt-copy-feed-{i}", daemon=True)
               for i, p in enumerate(procs)]
    for t in feeders:
        t.start()
    out: list[Outcome] = []
    live = len(feeders)
    try:
        while live:
            try:
                kind, value = replies.get(timeout=0.5)
            except queue.Empty:
                kind, value = "", None
            if kind == "done":
                live -= 1
            elif kind == "error":
                raise value
            elif kind == "rows":
                for o in outcomes(value):
                    out.append(o)
                    if on_done:
                        on_done(o)
                if check is not None:
                    check()
            if cancel.is_set():
                raise Cancelled("the run was interrupted")
    except BaseException:
        stopping.set()
        for p in procs:  # each finishes or removes the file in hand, takes no other
            try:
                p.send_signal(signal.SIGUSR1)
            except OSError:
                pass
        raise
    finally:
        stopping.set()
        for t in feeders:
            t.join()
        for p in procs:
            p.wait()
            if p.stdout is not None:
                p.stdout.close()
    return out


_HEADER = struct.Struct("!Q")
#: ``python -c BOOT PATH PID``: the process, with ``PATH`` (JSON) as its module path, ``PID`` its parent;
#: Ctrl-C and SIGTERM ignored from its first line (the parent stops it), so none prints a traceback
BOOT = ("import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "import json, sys; sys.path[:] = json.loads(sys.argv[1]); from dr_toolkit.copy.processes import main; main()")


def send(f: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(_HEADER.pack(len(data)) + data)
    f.flush()


def receive(f: IO[bytes]) -> Any:
    """The next frame; EOFError when the other side closed its end."""
    head = f.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError("the other side closed the pipe")
    n = _HEADER.unpack(head)[0]
    data = f.read(n)
    if len(data) < n:
        raise EOFError("the other side closed the pipe mid-frame")
    return pickle.loads(data)


def main() -> None:
    parent = int(sys.argv[2])
    try:  # first, before anything is read: killed with the parent (Linux)
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before that took effect: nothing to do
        return
    stop = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: stop.set())
    # the frames go through private descriptors: a stray print cannot corrupt them
    rin = os.fdopen(os.dup(0), "rb")
    wout = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    while True:
        try:
            job, group = receive(rin)
        except EOFError:
            return
        try:
            reply: tuple[str, Any] = ("rows", list(job(group, cancel=stop)))
        except BaseException as exc:  # noqa: BLE001 - handed to the parent, which raises it
            try:
                pickle.dumps(exc)
                reply = ("error", exc)
            except Exception:  # noqa: BLE001 - an exception that does not pickle: its text
                reply = ("error", RuntimeError(f"{type(exc).__name__}: {exc}"))
        send(wout, reply)

