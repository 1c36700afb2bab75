"""The `child_process` marker's runner (tests/support/child.py): a test whose native client
aborts fails alone, with what it wrote; this process — the suite — lives on."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.child import outcome, run_child

ABORTS = '''
import os, sys

def test_native_abort():
    sys.stderr.write("*** rdkafka_example.c:1: assert: the broker went away ***\\n")
    sys.stderr.flush()
    os.abort()
'''

FAILS = '''
def test_plain_failure():
    assert 1 + 1 == 3, "arithmetic moved"
'''

PASSES = '''
def test_fine():
    assert True
'''


def _run(tmp_path: Path, name: str, body: str) -> tuple[str, str | None]:
    (tmp_path / f"{name}.py").write_text(body)
    rc, text, _ = run_child(f"{name}.py", tmp_path, timeout_s=120)
    return outcome(rc, text, 120)


def test_an_abort_in_the_child_is_one_failure_with_the_assertion_text(tmp_path: Path) -> None:
    result, text = _run(tmp_path, "test_aborts", ABORTS)
    assert result == "failed"
    assert text is not None and "SIGABRT" in text and "assert: the broker went away" in text


def test_a_plain_failure_carries_the_assertion(tmp_path: Path) -> None:
    result, text = _run(tmp_path, "test_fails", FAILS)
    assert result == "failed" and text is not None and "arithmetic moved" in text


def test_a_passing_child_passes(tmp_path: Path) -> None:
    assert _run(tmp_path, "test_passes", PASSES) == ("passed", None)


MODULE_FIXTURE_THEN_CHILD = '''
import pytest

@pytest.fixture(scope="module")
def mod():
    yield 1

def test_uses_the_module_fixture(mod):
    assert mod == 1

@pytest.mark.child_process
def test_last_of_its_module_runs_in_a_child():
    assert True
'''

NEXT_MODULE = '''
def test_in_the_next_module():
    assert True
'''


def test_a_child_test_last_in_its_module_tears_the_module_down_for_the_next(tmp_path: Path) -> None:
    """The CI run of 2026-11-29 ended in 'previous item was not torn down properly': the marked
    test was its module's last, and its module fixture was still set up when the next module began."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "conftest.py").write_text(
        "import pytest\n"
        "from tests.conftest import pytest_runtest_protocol  # noqa: F401\n"
        "def pytest_configure(config):\n"
        "    config.addinivalue_line('markers', 'child_process: run in a child pytest')\n")
    (tmp_path / "test_a.py").write_text(MODULE_FIXTURE_THEN_CHILD)
    (tmp_path / "test_b.py").write_text(NEXT_MODULE)
    env = dict(os.environ, PYTHONPATH=str(root))
    env.pop("DRT_TEST_CHILD", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                           f"--basetemp={tmp_path / 'bt'}", "test_a.py", "test_b.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "3 passed" in done.stdout


def _outer_run(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_runtest_protocol  # noqa: F401\n"
        "def pytest_configure(config):\n"
        "    config.addinivalue_line('markers', 'child_process: run in a child pytest')\n")
    (tmp_path / "test_it.py").write_text(body)
    env = dict(os.environ, PYTHONPATH=str(root))
    env.pop("DRT_TEST_CHILD", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=-ra",
                           f"--basetemp={tmp_path / 'bt'}", "test_it.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


ABORTS_ONCE = '''
import os, sys
from pathlib import Path
import pytest

@pytest.mark.child_process(native_abort_retries=1)
def test_aborts_the_first_time():
    seen = Path(__file__).with_name("seen")
    if not seen.exists():
        seen.write_text("1")
        sys.stderr.write("*** rdkafka_queue.h:1086:rd_kafka_q_destroy0: assert: rkq->rkq_refcnt > 0 ***\\n")
        sys.stderr.flush()
        os.abort()
'''

ABORTS_ALWAYS = '''
import os, sys
import pytest

@pytest.mark.child_process(native_abort_retries=1)
def test_aborts_every_time():
    sys.stderr.write("*** rdkafka_queue.h:1086:rd_kafka_q_destroy0: assert: rkq->rkq_refcnt > 0 ***\\n")
    sys.stderr.flush()
    os.abort()
'''

FAILS_PLAINLY = '''
import pytest

@pytest.mark.child_process(native_abort_retries=3)
def test_fails():
    assert False, "a plain failure is never run again"
'''


def test_a_known_native_abort_runs_the_test_again_and_says_so(tmp_path: Path) -> None:
    done = _outer_run(tmp_path, ABORTS_ONCE)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 passed" in done.stdout and "after a native assertion" in done.stdout


def test_a_native_abort_every_time_fails_the_test(tmp_path: Path) -> None:
    done = _outer_run(tmp_path, ABORTS_ALWAYS)
    assert done.returncode == 1 and "SIGABRT" in done.stdout, done.stdout[-3000:]


def test_a_plain_failure_is_not_run_again(tmp_path: Path) -> None:
    done = _outer_run(tmp_path, FAILS_PLAINLY)
    assert done.returncode == 1 and "after a native assertion" not in done.stdout, done.stdout[-3000:]
