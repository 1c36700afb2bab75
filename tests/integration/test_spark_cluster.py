"""The Spark paths on a real standalone cluster (1 master + 2 workers, separate JVMs on
127.0.0.1): the library reaches the executors (shipped zip), credentials reach them redacted
(the driver's REST environment page, driver and executor logs), verify with planted
differences through `drt verify --spark-master`, a copy whose executor is SIGKILLed mid-copy,
spark-submit's own settings winning, and Spark start-up failures as one line.

Each Spark driver runs in its own process (one SparkContext per process).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dr_toolkit.spark.session import QUICK_START_JVM
from tests.support import spark_cluster as cluster_fixtures
from tests.support.spark_cluster import SparkCluster, spark_home
from tests.support.spark_quick import quick_jvms

spark_cluster = cluster_fixtures.spark_cluster  # the session-scoped cluster fixture

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.spark_cluster, pytest.mark.usefixtures("copy_state_dir")]
REPO = Path(__file__).resolve().parents[2]
DRT = [sys.executable, "-m", "dr_toolkit.cli.main"]


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_GATEWAY", "DRT_SPARK_MASTER"))}
    e.update({"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(REPO)}, **extra)
    return e


def no_trace(text: str) -> None:
    assert "Traceback" not in text and "Py4JJavaError" not in text, text[-3000:]


def test_library_and_credentials_reach_executors_redacted(spark_cluster: SparkCluster, tmp_path: Path) -> None:
    from tests.support.spark_probe import SECRETS, digest

    p = subprocess.run([sys.executable, "-m", "tests.support.spark_probe", spark_cluster.master_url],
                       env=env(SPARK_CONF_DIR=quick_jvms(tmp_path / "conf")),  # one task per worker: quick JVMs
                       capture_output=True, text=True, timeout=400, cwd=REPO)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["app_id"].startswith("app-") and out["master"] == spark_cluster.master_url
    tasks = out["tasks"]
    # executors are other processes than the driver, and imported dr_toolkit from the shipped zip
    assert {t["pid"] for t in tasks}.isdisjoint({out["driver_pid"], os.getpid()})
    assert all(".zip/dr_toolkit/" in t["file"] for t in tasks), tasks
    assert all(t["secrets"] == {k: digest(v) for k, v in SECRETS.items()} for t in tasks)
    assert any(w.glob(f"{out['app_id']}/*/stderr") for w in spark_cluster.work_dirs)
    shown = out["environment"]
    assert "spark.executorEnv.AWS_SECRET_ACCESS_KEY" in shown and "redacted" in shown
    for secret in SECRETS.values():
        assert secret not in shown
        assert secret not in p.stderr and secret not in p.stdout
        assert secret not in spark_cluster.executor_logs()


def _parquet(path: Path, rows: list[dict]) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), path / "part-0.parquet")
    return f"file://{path}"


def test_verify_on_the_cluster_finds_planted_differences(spark_cluster: SparkCluster, tmp_path: Path) -> None:
    src_rows = [{"id": i, "v": f"v{i}", "tags": [None, "x"] if i % 7 == 0 else ["x"], "amt": i * 0.5}
                for i in range(3000)]
    peer_rows = [dict(r) for r in src_rows if r["id"] not in (5, 6)]
    for r in peer_rows:
        if r["id"] == 14:
            r["tags"] = ["x", None]  # nested NULL moved: Spark's xxhash64 alone calls this equal
        if r["id"] == 100:
            r["v"] = "changed"
    peer_rows.append({"id": 9000, "v": "new", "tags": [], "amt": 1.0})
    src, peer = _parquet(tmp_path / "s", src_rows), _parquet(tmp_path / "p", peer_rows)
    p = subprocess.run([*DRT, "--json", "verify", src, peer, "--key", "id", "--buckets", "64",
                        "--spark-master", spark_cluster.master_url], env=env(SPARK_CONF_DIR=quick_jvms(tmp_path / "conf")),
                       capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert p.returncode == 1, p.stderr[-3000:]
    no_trace(p.stderr)
    d = json.loads(p.stdout)
    assert (d["ONLY_IN_SOURCE_TABLE_ROWS"], d["ONLY_IN_PEER_TABLE_ROWS"], d["CONTENT_DIFFERENT_ROWS"]) == (2, 1, 2)
    assert d["GOODROWS"] == 3000 - 2 - 2
    assert d["column_mismatches"] == {"tags": 1, "v": 1}
    assert d["provenance"]["spark_master"] == spark_cluster.master_url
    app = d["provenance"]["spark_app_id"]
    assert any(w.glob(f"{app}/*/stderr") for w in spark_cluster.work_dirs)  # tasks ran in the workers' executors


def _tree(root: Path, files: int, size: int) -> dict[str, bytes]:
    out = {}
    for i in range(files):
        rel = f"d{i % 4}/f{i:03d}.bin"
        data = os.urandom(size)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
        out[rel] = data
    return out


def _finals(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and not p.name.startswith(".drt") and ".drt" not in p.relative_to(root).parts[0]}


def test_copy_survives_an_executor_killed_mid_copy(spark_cluster: SparkCluster, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    want = _tree(src, 48, 384 << 10)
    dst.mkdir()
    cmd = [*DRT, "--json", "distcp", f"file://{src}", f"file://{dst}", "--engine", "spark",
           "--bandwidth-mb-s", "2"]
    proc = subprocess.Popen(cmd, env=env(DRT_SPARK_MASTER=spark_cluster.master_url), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    killed = None
    deadline = time.monotonic() + 300
    while killed is None and proc.poll() is None and time.monotonic() < deadline:
        started = any(p.name.startswith(".drt-tmp.") and p.name != ".drt-tmp.fence" for p in dst.rglob("*"))
        execs = spark_cluster.executor_pids()
        if started and execs:
            done_before = len(_finals(dst))
            killed = execs[0]
            os.kill(killed, signal.SIGKILL)
        else:
            time.sleep(0.2)
    out, err = proc.communicate(timeout=400)
    assert killed is not None, f"the copy ended before an executor could be killed: {err[-2000:]}"
    assert done_before < len(want)
    no_trace(err)
    assert proc.returncode in (0, 1), err[-3000:]
    # no partial file: whatever is under a real name is the whole source file
    for rel, data in _finals(dst).items():
        if not rel.startswith(".drt"):
            assert data == want[rel], rel
    if proc.returncode == 0:
        assert json.loads(out)["files_copied"] == len(want)
    # resumable: the next run finishes (or has nothing left) and leaves no temp file behind
    again = subprocess.run([*DRT, "--json", "distcp", f"file://{src}", f"file://{dst}"], env=env(),
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    assert {k: v for k, v in _finals(dst).items() if not k.startswith(".drt")} == want
    assert not [p for p in dst.rglob(".drt-tmp.*")]


def test_executors_place_no_file_once_another_run_takes_the_target(spark_cluster: SparkCluster,
                                                                   tmp_path: Path) -> None:
    """The driver is SIGSTOPped mid-copy (a GC pause past its lease) and another run takes the
    target: its first step rewrites the fencing marker ``.drt-tmp.fence`` (a run on another host:
    this host's flock does not reach it). The executors, which run on without their driver and
    never reach the ledger, compare the marker before each rename into place: no file is placed
    after it was taken, and the run, resumed, exits 1 in one line (issue 21)."""
    from dr_toolkit.copy.state import FENCE_NAME, take_fence
    from dr_toolkit.fs.local import LocalFileSystem

    src, dst = tmp_path / "src", tmp_path / "dst"
    want = _tree(src, 32, 256 << 10)
    dst.mkdir()
    proc = subprocess.Popen([*DRT, "distcp", f"file://{src}", f"file://{dst}", "--engine", "spark",
                             "--bandwidth-mb-s", "1"], env=env(DRT_SPARK_MASTER=spark_cluster.master_url),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)

    def placed() -> dict[str, int]:
        return {str(p.relative_to(dst)): p.stat().st_ino for p in dst.rglob("*")
                if p.is_file() and not p.name.startswith(".drt-tmp.")}

    try:
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline and not (  # executors writing temp copies
                (dst / FENCE_NAME).exists()
                and any(p.name.startswith(".drt-tmp.") and p.name != FENCE_NAME for p in dst.rglob("*"))):
            time.sleep(0.1)
        assert proc.poll() is None, f"the copy ended before it could be paused: {proc.communicate()[1][-2000:]}"
        os.kill(proc.pid, signal.SIGSTOP)  # the Python driver: its executors go on copying
        take_fence(LocalFileSystem(), str(dst.resolve()), "copy:other-host:0001")
        held = placed()
        time.sleep(2)  # the executors run on while their driver is stopped (not an assertion on timing)
        os.kill(proc.pid, signal.SIGCONT)
        _out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    no_trace(err)
    assert proc.returncode == 1 and "another run took the target" in err, err[-3000:]
    assert len(held) < len(want)
    assert placed() == held  # no executor placed (or replaced) a file after the marker was taken
    assert (dst / FENCE_NAME).read_text().split()[:2] == ["2", "copy:other-host:0001"]  # left to its owner


def _bare_python(where: Path) -> str:
    """A Python with none of the project's packages (what a worker has when nothing was
    installed on it): a new virtualenv of the same interpreter, without the base's site-packages."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    subprocess.run([base, "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True)
    py = str(where / "bin" / "python")
    probe = subprocess.run([py, "-c", "import pydantic"], capture_output=True, text=True)
    assert probe.returncode != 0, f"{py} can import pydantic: not a bare worker Python"
    return py


def test_copy_engine_runs_on_workers_whose_python_has_none_of_the_projects_packages(
        spark_cluster: SparkCluster, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    want = _tree(src, 8, 64 << 10)
    bare = _bare_python(tmp_path / "bare")
    # the executors run `bare` (spark.pyspark.python follows $PYSPARK_PYTHON)
    e = env(DRT_SPARK_MASTER=spark_cluster.master_url, PYSPARK_PYTHON=bare,
            DRT_CACHE_DIR=str(tmp_path / "cache"))
    before = {a for w in spark_cluster.work_dirs for a in w.glob("app-*")}
    p = subprocess.run([*DRT, "--json", "distcp", f"file://{src}", f"file://{dst}", "--engine", "spark"], env=e,
                       capture_output=True, text=True, timeout=400, cwd=tmp_path)
    no_trace(p.stderr)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout)["files_copied"] == len(want) and _finals(dst) == want
    # the packages came with the job: one archive of the executors' packages, cached for the next run
    assert len(list((tmp_path / "cache").glob("executor-env-*.tar.gz"))) == 1
    # the copy engine's executors were started with the quick-start JVM options (session.CONTEXT_DEFAULTS)
    launched = [ex / "stderr" for w in spark_cluster.work_dirs for a in w.glob("app-*") if a not in before
                for ex in a.iterdir() if (ex / "stderr").is_file()]
    assert launched, "no executor of the run found in the workers' work directories"
    for log in launched:
        command = log.read_text(errors="replace").split("\n", 1)[0]
        assert "Spark Executor Command" in command and all(o in command for o in QUICK_START_JVM.split()), command


CONTEXT_PROBE = """
import json, sys
from pyspark.sql import SparkSession
from dr_toolkit.spark.session import get_context
sc = get_context(sys.argv[1], app_name="drt-context-probe")
print("PROBE " + json.dumps({"sql_session": SparkSession.getActiveSession() is not None,
                             "driver": sc.getConf().get("spark.driver.extraJavaOptions", None),
                             "same": get_context(sys.argv[1]) is sc}))
sc.stop()
"""


COPY_THEN_SESSION = """
import json, sys
from pyspark import SparkContext
from dr_toolkit.cli.main import main
from dr_toolkit.spark.session import get_session
rc = main(["--json", "distcp", sys.argv[2], sys.argv[3], "--engine", "spark", "--spark-master", sys.argv[1]])
assert rc == 0, rc
left = SparkContext._active_spark_context is not None
s = get_session(sys.argv[1], app_name="drt-verify")
print("PROBE " + json.dumps({"left_running": left, "app": s.sparkContext.appName,
                             "executor_jvm": s.sparkContext.getConf().get("spark.executor.extraJavaOptions", None)}))
s.stop()
"""


def test_a_session_after_a_spark_copy_in_the_same_process_is_its_own(spark_cluster: SparkCluster,
                                                                     tmp_path: Path) -> None:
    """The copy engine stops the context it started: a verify after it (the runbook's final copy,
    then its final verify) gets a session of its own, not the copy's quick-start JVMs. Only the
    drivers start with the quick-start options (spark-defaults.conf): the executors' are what is checked."""
    src = tmp_path / "src"
    _tree(src, 3, 1024)
    p = subprocess.run([sys.executable, "-c", COPY_THEN_SESSION, spark_cluster.master_url, f"file://{src}",
                        f"file://{tmp_path / 'dst'}"],
                       env=env(SPARK_CONF_DIR=quick_jvms(tmp_path / "conf", executors=False)),
                       capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(next(ln for ln in p.stdout.splitlines() if ln.startswith("PROBE "))[6:])
    assert got["left_running"] is False and got["app"] == "drt-verify", got
    assert not any(o in (got["executor_jvm"] or "") for o in QUICK_START_JVM.split()), got  # a JVM of its own


def test_the_copy_engine_context_starts_no_sql_session_and_is_reused(spark_cluster: SparkCluster,
                                                                      tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-c", CONTEXT_PROBE, spark_cluster.master_url], env=env(),
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(next(ln for ln in p.stdout.splitlines() if ln.startswith("PROBE "))[6:])
    assert got["sql_session"] is False and got["same"] is True, got
    assert got["driver"].endswith(QUICK_START_JVM), got  # after Spark's own default options


UNSHIPPED = """
import sys
from dr_toolkit.errors import DrtError
from dr_toolkit.spark.executor_env import check_executors
from dr_toolkit.spark.session import get_session
s = get_session(sys.argv[1], ship_library=False)
try:
    check_executors(s.sparkContext)
    print("NOT REFUSED")
except DrtError as exc:
    print("REFUSED", exc.exit_code, exc.message)
s.stop()
"""


def test_workers_that_cannot_import_the_tasks_packages_are_refused_in_one_line(
        spark_cluster: SparkCluster, tmp_path: Path) -> None:
    bare = _bare_python(tmp_path / "bare")
    p = subprocess.run([sys.executable, "-c", UNSHIPPED, spark_cluster.master_url],
                       env=env(PYSPARK_PYTHON=bare, SPARK_CONF_DIR=quick_jvms(tmp_path / "conf")),
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    line = next((ln for ln in p.stdout.splitlines() if ln.startswith(("REFUSED", "NOT REFUSED"))), p.stdout)
    assert line.startswith("REFUSED 2 ") and "the executors' Python" in line and "google_crc32c" in line, line
    no_trace(p.stderr)  # the probe imports inside a try: no task failed, no trace was logged


SUBMIT_PROBE = """
import json, sys
from dr_toolkit.spark.session import get_session
s = get_session("local[2]", app_name="drt-verify")
c = s.sparkContext.getConf()
print("PROBE " + json.dumps({k: c.get(k, None) for k in
      ("spark.master", "spark.app.name", "spark.sql.shuffle.partitions", "spark.ui.enabled",
       "spark.sql.session.timeZone")}))
s.stop()
"""


def test_spark_submit_settings_win(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(SUBMIT_PROBE)
    p = subprocess.run([str(spark_home() / "bin" / "spark-submit"), "--master", "local[1]", "--conf",
                        "spark.sql.shuffle.partitions=64", "--conf", "spark.ui.enabled=true", "--conf",
                        "spark.ui.port=0", "--name", "user-app", str(probe)],
                       env=env(SPARK_HOME=str(spark_home()), PYSPARK_DRIVER_PYTHON=sys.executable,
                               SPARK_CONF_DIR=quick_jvms(tmp_path / "conf")),  # (none of the keys checked)
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(next(ln for ln in p.stdout.splitlines() if ln.startswith("PROBE "))[6:])
    assert got == {"spark.master": "local[1]", "spark.app.name": "user-app", "spark.sql.shuffle.partitions": "64",
                   "spark.ui.enabled": "true", "spark.sql.session.timeZone": "UTC"}  # only the unset key filled


def test_spark_start_up_failures_are_one_line(tmp_path: Path) -> None:
    d = tmp_path / "d"
    src = _parquet(d, [{"id": 1}])
    bad = subprocess.run([*DRT, "verify", src, src, "--key", "id", "--spark-master", "bogus://x"], env=env(),
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert bad.returncode == 2 and "not a Spark master URL" in bad.stderr
    no_java = subprocess.run([*DRT, "verify", src, src, "--key", "id"], env=env(JAVA_HOME=str(tmp_path / "nojava")),
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert no_java.returncode == 2, no_java.stderr[-2000:]  # an installation problem, said before the JVM starts
    no_trace(no_java.stderr)
    assert "Spark cannot start" in no_java.stderr and "JAVA_HOME" in no_java.stderr
