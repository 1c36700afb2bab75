"""``python -m drt_servers resolve`` — fetch and cache every server's Maven artifacts (``make setup``).

``python -m drt_servers start COMPONENT... --dir DIR`` — start servers for development, print
where they listen, their start-up time and memory, and keep them until Ctrl-C.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import tempfile
import time
from pathlib import Path

from dr_toolkit.errors import EXIT_OK, EXIT_USAGE
from drt_servers import maven


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m drt_servers")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("resolve", help="resolve and cache every component's Maven artifacts")
    st = sub.add_parser("start", help="start components until Ctrl-C, printing start-up time and memory")
    st.add_argument("components", nargs="+")
    st.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "resolve":
            t0 = time.monotonic()
            for comp, n in maven.resolve_all().items():
                print(f"servers: {comp}: {n} jars ({', '.join(maven.coordinates(comp))})", file=sys.stderr)
            print(f"servers: artifacts resolved in {time.monotonic() - t0:.1f} s", file=sys.stderr)
            return EXIT_OK
        root = args.dir or Path(tempfile.mkdtemp(prefix="drt-servers-"))
        started = []
        for comp in args.components:
            mod = importlib.import_module(f"drt_servers.{comp}")
            started.extend(mod.start_for_cli(root / comp))  # each module: start_for_cli(dir) -> [ManagedProcess]
        for p in started:
            print(p.describe())
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
        for p in reversed(started):
            p.stop()
        return EXIT_OK
    except maven.ServerSetupError as exc:
        print(f"servers: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
