"""The `child_process` marker's runner (tests/support/child.py): a test whose native client
aborts fails alone, with what it wrote; this process — the suite — lives on."""

from __future__ import annotations

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
