"""Run one test in a child pytest process (the `child_process` marker).

A test that kills a server under a native client (librdkafka, via confluent_kafka) can make that
client abort the whole interpreter (SIGABRT from an assertion in C). In the suite's own process
that would end the run — nothing after it would run. Marked tests run instead in a child
``python -m pytest <nodeid>``: its own fixtures (the marked test must use only fixtures it can set
up alone — function-scoped servers, ``tmp_path``), its own temporary directory, and its exit status
read here. A child killed by a signal is that test's failure, with the signal's name and the tail of
what the child wrote (where the native library prints its assertion), never the suite's end.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pytest
from _pytest.reports import TestReport

CHILD_ENV = "DRT_TEST_CHILD"
CHILD_TIMEOUT_S = 900.0
TAIL_LINES = 80


def in_child() -> bool:
    return os.environ.get(CHILD_ENV) == "1"


def _tail(text: str, n: int = TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-n:])


# librdkafka's `*** file.c:N:func: assert: … ***`, glibc's `…: Assertion `…' failed.`
_NATIVE_ASSERT = re.compile(r"\*\*\*.*assert.*\*\*\*|Assertion .* failed")


def native_assertions(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if _NATIVE_ASSERT.search(line)]


def run_child(nodeid: str, rootdir: Path, timeout_s: float = CHILD_TIMEOUT_S) -> tuple[int | None, str, float]:
    """(exit status — negative for a signal, None on timeout —, the child's output, seconds)."""
    tmp = Path(tempfile.mkdtemp(prefix="drt-child-"))
    # -s: a native library writes its assertion to fd 2 and aborts; under pytest's capture it would be lost
    cmd = [sys.executable, "-m", "pytest", nodeid, "-q", "-s", "-p", "no:cacheprovider", "-o", "addopts=-ra",
           f"--basetemp={tmp / 'basetemp'}", f"--timeout={int(timeout_s) - 30}"]
    env = dict(os.environ, **{CHILD_ENV: "1"})
    started = time.monotonic()
    with open(tmp / "output.log", "w+b") as out:
        proc = subprocess.Popen(cmd, cwd=rootdir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    shutil.rmtree(tmp, ignore_errors=True)
    return rc, text, time.monotonic() - started


def outcome(rc: int | None, text: str, timeout_s: float = CHILD_TIMEOUT_S) -> tuple[str, str | None]:
    """('passed' | 'failed', the failure's text). A test the child skipped is a failure here: this
    suite never skips (a server that cannot start fails its test)."""
    if rc == 0:
        if " passed" not in text:
            return "failed", f"the child process ran no test to a pass\n{_tail(text)}"
        return "passed", None
    if rc is None:
        return "failed", f"the child process ran past {timeout_s:.0f} s and was killed\n{_tail(text)}"
    if rc < 0:
        name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        asserts = native_assertions(text)
        said = f"; it said: {' | '.join(asserts)}" if asserts else ""
        return "failed", (f"the child process died of {name} (a native client aborting?){said}\n"
                          f"the last lines it wrote:\n{_tail(text)}")
    return "failed", _tail(text, 200)


def own_nodeid(item: pytest.Item) -> str:
    """The node id the child can collect: under ``--dist loadgroup`` pytest-xdist appends
    ``@<group>`` to the ids of the tests of an ``xdist_group``, which no collection knows."""
    groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                     for m in item.iter_markers("xdist_group")})
    suffix = "@" + "_".join(groups)
    return item.nodeid[:-len(suffix)] if groups and item.nodeid.endswith(suffix) else item.nodeid


def run_item(item: pytest.Item) -> None:
    """The whole test protocol for ``item``, run in a child process and reported here."""
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    rc, text, took = run_child(own_nodeid(item), Path(str(item.config.rootpath)))
    # ``@pytest.mark.child_process(native_abort_retries=1)``: a test whose own process holds a
    # librdkafka client while it kills that client's broker meets librdkafka's known aborts (an
    # assertion in its C code, e.g. ``rdkafka_queue.h: assert: rkq->rkq_refcnt > 0``; no release
    # fixes them) — the product's `drt` runs such clients guarded (cli/guard.py). The test runs
    # again, at most that many times, only when the child died of a signal after printing a native
    # assertion; each abort is said as a warning, and the test's own assertions still decide.
    marker = item.get_closest_marker("child_process")
    retries = int(marker.kwargs.get("native_abort_retries", 0)) if marker is not None else 0
    while retries > 0 and rc is not None and rc < 0 and native_assertions(text):
        retries -= 1
        warnings.warn(pytest.PytestWarning(
            f"{item.nodeid}: the child died of signal {-rc} after a native assertion "
            f"({' | '.join(native_assertions(text))}); run again"), stacklevel=1)
        rc, text, again = run_child(own_nodeid(item), Path(str(item.config.rootpath)))
        took += again
    result, longrepr = outcome(rc, text)
    keywords = {k: 1 for k in item.keywords}
    now = time.time()

    def report(when: str, res: str, rep: str | None, duration: float) -> None:
        r = TestReport(item.nodeid, item.location, keywords, res, rep, when,  # type: ignore[arg-type]
                       sections=[("child process output", _tail(text))] if res == "failed" else [],
                       duration=duration, start=now - duration, stop=now)
        ihook.pytest_runtest_logreport(report=r)

    report("setup", "passed", None, 0.0)
    report("call", result, longrepr, took)
    report("teardown", "passed", None, 0.0)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
