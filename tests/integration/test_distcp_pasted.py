"""A Hadoop user's DistCp line pasted after `drt` runs (issue 43 #8): DistCp's own spelling of
every option it has is an option of `drt distcp` (-update -delete -overwrite -append -bandwidth
-f …), accepted with a note when drt already does what it asks (-skipcrccheck -direct
-copybuffersize …), or refused with why when there is no equivalent (-atomic -async …). On the
session's real HDFS (tests/support/fixtures_hdfs.py), `drt` run as a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("copy_state_dir")]


def drt(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL")}
    return subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def pasted(line: str, *, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`hadoop distcp …` as a user pastes it, run as `drt --json distcp …`."""
    words = line.split()
    assert words[:2] == ["hadoop", "distcp"]
    return drt("--json", "distcp", *words[2:], cwd=cwd)


def test_a_pasted_hadoop_distcp_line_runs(tmp_path: Path, hot_dir: Any) -> None:
    for rel, data in {"src/a.txt": b"a" * 100, "src/d/b.log": b"log line 1\n", "dst/gone.txt": b"old"}.items():
        hot_dir.write(rel, data)
    src, dst = hot_dir.uri("/src"), hot_dir.uri("/dst")

    r = pasted(f"hadoop distcp -update -delete -skipcrccheck -m 2 -bandwidth 5 -pt {src} {dst}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["files_copied"], doc["files_deleted"]) == (2, 1), doc
    assert hot_dir.tree("/dst") == {"a.txt": b"a" * 100, "d/b.log": b"log line 1\n"}
    assert r.stderr.splitlines() == ["note: DistCp's -skipcrccheck is accepted and has no effect here: files are "
                                     "still compared by checksum or content (never by size alone) and each copy "
                                     "is verified"], r.stderr

    # -append: the grown log's tail is put on the target's end (its prefix proven), not copied whole
    hot_dir.append("src/d/b.log", b"log line 2\n")
    r = pasted(f"hadoop distcp -update -append -direct -copybuffersize 65536 {src} {dst}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["files_appended"] == 1 and doc["bytes_copied"] == len(b"log line 2\n"), doc
    assert hot_dir.read("dst/d/b.log") == b"log line 1\nlog line 2\n"

    # -overwrite: every file rewritten
    r = pasted(f"hadoop distcp -overwrite {src} {dst}", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["files_copied"] == 2, r.stderr

    # -f: a local file listing the sources (one a line), each copied to TARGET/<its name>
    hot_dir.write("more/c.txt", b"c")
    listing = tmp_path / "srclist"
    listing.write_text(f"{src}\n\n{hot_dir.uri('/more')}\n")
    r = pasted(f"hadoop distcp -f {listing} {hot_dir.uri('/many')}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(hot_dir.tree("/many")) == ["more/c.txt", "src/a.txt", "src/d/b.log"]


@pytest.mark.parametrize(("line", "says"), [
    ("hadoop distcp -atomic -tmp /t SRC DST", "DistCp's -atomic has no equivalent"),
    ("hadoop distcp -update -async SRC DST", "DistCp's -async has no equivalent"),
    ("hadoop distcp -Dmapreduce.job.queuename=etl -update SRC DST", "Hadoop properties are not read"),
    ("hadoop distcp -append SRC DST", "-append needs --update"),
    ("hadoop distcp -bandwidth 5 --bandwidth-mb-s 10 SRC DST", "-bandwidth and --bandwidth-mb-s do not go together"),
])
def test_distcp_options_without_an_equivalent_are_refused_saying_why(tmp_path: Path, hot_dir: Any, line: str,
                                                                     says: str) -> None:
    hot_dir.write("src/a.txt", b"a")
    r = pasted(line.replace("SRC", hot_dir.uri("/src")).replace("DST", hot_dir.uri("/dst")), cwd=tmp_path)
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("drt: error: ") and says in r.stderr, r.stderr
    assert hot_dir.stat("/dst") is None
