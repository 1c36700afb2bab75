"""`drt` start-up against `python -c pass`, measured in the same run (issue 13's < 0.3 s goal).

Prints, for each case, the best and the median wall time of N fresh processes and the ratio
of the best to `python -c pass`:

- `drt --help`
- `drt distcp --help`
- `drt config validate` on examples/embedded.yaml
- `drt distcp SRC DST` start-up: from process start to its first filesystem call on SRC or
  DST (seen by an audit hook: the first ``open``/``os.scandir``/``os.listdir``/``os.mkdir``
  under the benchmark's directory), with no topology file, as a new user runs it.

With ``--baseline-tree DIR`` (a checkout of an earlier commit, e.g. made with
``git archive <commit> dr_toolkit | tar -x -C DIR``) the `drt` cases also run against that
tree's ``dr_toolkit`` (through PYTHONPATH), in the same rounds, for a before/after ratio.

Python byte-code is compiled first (``compileall``), as ``pip install`` does, because this
environment may set PYTHONDONTWRITEBYTECODE and then every run would re-compile every module.

    .venv/bin/python benchmarks/cli_startup_bench.py [--runs 9] [--baseline-tree DIR]
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DRT = [sys.executable, "-c", "import sys; from dr_toolkit.cli.main import main; sys.exit(main())"]

# The child for the distcp start-up: the `drt` console script's two lines, plus an audit hook
# that reports the time of the first filesystem call under ROOT and ends the process there.
FIRST_FS_CALL = r"""
import os, sys, time
root = sys.argv[1]
events = {"open", "os.scandir", "os.listdir", "os.mkdir", "os.rename", "os.remove", "shutil.copyfile"}
def hook(event, args):
    if event in events and args:
        p = args[0]
        if isinstance(p, (str, bytes, os.PathLike)) and os.fsdecode(p).startswith(root):
            os.write(1, f"{time.monotonic()!r} {event} {os.fsdecode(p)}\n".encode())
            os._exit(0)
sys.addaudithook(hook)
sys.argv = ["drt", *sys.argv[2:]]
from dr_toolkit.cli.main import main
sys.exit(main())
"""


def compile_bytecode(*trees: Path) -> None:
    for tree in trees:
        compileall.compile_dir(tree / "dr_toolkit", quiet=1)
    site = Path(sysconfig.get_paths()["purelib"])
    if not (site / "typer" / "__pycache__").is_dir():
        print(f"(compiling byte-code under {site} once, as pip install does)", flush=True)
        compileall.compile_dir(site, quiet=1, workers=0)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def wall(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child): CPU time is the figure to trust on a busy machine."""
    c0, t0 = _cpu(), time.perf_counter()
    r = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    took, cpu = time.perf_counter() - t0, _cpu() - c0
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[3:])}: exit {r.returncode}: {r.stderr.decode()[-500:]}")
    return took, cpu


def first_fs_call(env: dict[str, str], cwd: Path, i: int) -> tuple[float, float]:
    data = cwd / "data"  # not the cwd itself: the import system lists that
    src, dst = data / "src", data / f"dst{i}"
    c0, t0 = _cpu(), time.monotonic()
    r = subprocess.run([sys.executable, "-c", FIRST_FS_CALL, str(data), "distcp", src.as_uri(), dst.as_uri()],
                       env=env, cwd=cwd, capture_output=True, text=True)
    line = r.stdout.strip().splitlines()
    if r.returncode != 0 or not line:
        raise SystemExit(f"distcp start-up probe failed: exit {r.returncode}: {r.stderr[-500:]}")
    return float(line[-1].split()[0]) - t0, _cpu() - c0  # the child ends at that call: its CPU is up to it


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--baseline-tree", type=Path, help="also time the dr_toolkit of this earlier checkout")
    a = ap.parse_args()
    compile_bytecode(REPO, *([a.baseline_tree] if a.baseline_tree else []))
    env = {k: v for k, v in os.environ.items() if k not in ("DRT_CONFIG", "DRT_LEDGER_URL", "PYTHONPATH")}
    base_env = {**env, "PYTHONPATH": str(a.baseline_tree.resolve())} if a.baseline_tree else None
    with tempfile.TemporaryDirectory(prefix="drt-startup-") as tmp:
        cwd = Path(tmp)
        (cwd / "data" / "src").mkdir(parents=True)
        (cwd / "data" / "src" / "a.txt").write_text("a\n")
        cfg = str(REPO / "examples" / "embedded.yaml")
        runners: dict[str, Callable[[int], tuple[float, float]]] = {
            "python -c pass": lambda i: wall([sys.executable, "-c", "pass"], env, cwd),
            "drt --help": lambda i: wall([*DRT, "--help"], env, cwd),
            "drt distcp --help": lambda i: wall([*DRT, "distcp", "--help"], env, cwd),
            "drt config validate": lambda i: wall([*DRT, "--config", cfg, "config", "validate"], env, cwd),
            "drt distcp: to first fs call": lambda i: first_fs_call(env, cwd, i),
        }
        if base_env is not None:
            be = base_env
            runners.update({
                "baseline: drt --help": lambda i: wall([*DRT, "--help"], be, cwd),
                "baseline: drt distcp --help": lambda i: wall([*DRT, "distcp", "--help"], be, cwd),
                "baseline: drt config validate": lambda i: wall([*DRT, "--config", cfg, "config", "validate"], be,
                                                                cwd),
                "baseline: distcp to first fs call": lambda i: first_fs_call(be, cwd, i + 10_000),
            })
        cases: dict[str, list[tuple[float, float]]] = {name: [] for name in runners}
        for i in range(a.runs):  # round robin: a burst of load on the machine hits every case alike
            for name, run in runners.items():
                cases[name].append(run(i))
    def best(name: str, k: int) -> float:
        return min(t[k] for t in cases[name])

    base_w, base_c = best("python -c pass", 0), best("python -c pass", 1)
    print(f"{'case':<36}{'best s':>8}{'median s':>10}{'x python':>10}{'cpu s':>8}{'x python':>10}   goal")
    for name, ts in cases.items():
        w, c = best(name, 0), best(name, 1)
        goal = "< 0.3 s" if name in ("drt --help", "drt distcp: to first fs call") else ""
        twin = {"baseline: distcp to first fs call": "drt distcp: to first fs call"}.get(
            name, name.replace("baseline: ", "", 1))
        if name.startswith("baseline: ") and twin in cases:
            goal = f"now {best(twin, 0) / w:.2f}x wall, {best(twin, 1) / c:.2f}x cpu of this"
        met = ("  met" if w < 0.3 else "  NOT met (wall)") if goal.startswith("<") else ""
        print(f"{name:<36}{w:>8.3f}{statistics.median(t[0] for t in ts):>10.3f}{w / base_w:>9.1f}x"
              f"{c:>8.3f}{c / base_c:>9.1f}x   {goal}{met}")
    print(f"({a.runs} runs each, {os.cpu_count()} cores, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())})")


if __name__ == "__main__":
    main()
