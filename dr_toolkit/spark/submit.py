"""spark-submit entry point: run a verification on a Spark cluster instead of in-process.

The Airflow task and `drt verify` run Spark in their own process (local mode by default). On
a cluster, submit the same job; the session spark-submit creates is the one used::

    # dr_toolkit must be importable on the driver: pip-install it there, or ship it (its
    # dependencies must be installed on driver and executors, or shipped with --archives)
    python -m zipfile -c dr_toolkit.zip dr_toolkit
    spark-submit --master yarn --deploy-mode client --py-files dr_toolkit.zip \\
        dr_toolkit/spark/submit.py verify-policy orders-table --config drt.yaml

    spark-submit --master yarn --py-files dr_toolkit.zip dr_toolkit/spark/submit.py \\
        verify hdfs://hot/warehouse/orders hdfs://cold/warehouse/orders --key order_id \\
        --config drt.yaml --report /reports/orders.html

spark-submit's master and configuration win: :func:`dr_toolkit.spark.session.get_session`
only fills in the keys it left unset. It prints the result JSON (DESIGN §3 ``drt verify``) on stdout and exits 0 (no difference),
1 (BADROWS > 0) or 2 (bad input), so a scheduler (an Airflow ``SparkSubmitOperator``) sees
the outcome. With ``--config`` the result is recorded in the topology's ledger.
"""

from __future__ import annotations

import argparse
import json
import sys

from dr_toolkit.errors import DrtError
from dr_toolkit.secrets import redact


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="submit.py", description="dr-toolkit Spark jobs (spark-submit entry point)")
    sub = p.add_subparsers(dest="job", required=True)
    v = sub.add_parser("verify", help="compare a dataset with its replica by key")
    v.add_argument("source")
    v.add_argument("target")
    v.add_argument("--key", required=True, help="key column(s), comma-separated")
    v.add_argument("--format", default="parquet")
    v.add_argument("--start-time")
    v.add_argument("--end-time")
    v.add_argument("--ts-column")
    v.add_argument("--recompare-sleep", type=float, default=0.0)
    v.add_argument("--report")
    v.add_argument("--table")
    v.add_argument("--peer-table")
    v.add_argument("--conn-id")
    v.add_argument("--peer-conn-id")
    v.add_argument("--buckets", type=int)
    v.add_argument("--name")
    v.add_argument("--config", help="topology file (for hdfs://<cluster> paths and the ledger)")
    v.add_argument("--ignore-columns", default="")
    v.add_argument("--abs-tol", type=float, default=0.0)
    v.add_argument("--rel-tol", type=float, default=0.0)
    v.add_argument("--ignore-spaces", action="store_true")
    v.add_argument("--ignore-case", action="store_true")
    pv = sub.add_parser("verify-policy", help="run a verify policy of the topology")
    pv.add_argument("policy")
    pv.add_argument("--config", help="topology file (default $DRT_CONFIG or ./drt.yaml)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        from dr_toolkit.access import Access
        from dr_toolkit.ledger import open_ledger
        from dr_toolkit.spark.session import get_session
        from dr_toolkit.topology import load_topology
        from dr_toolkit.verify.api import verify, verify_policy
        from dr_toolkit.verify.canon import CompareOptions

        access = Access.from_env()
        # under spark-submit the session is built from its master and conf; we only fill in unset keys
        spark = get_session(app_name="drt-verify")
        if args.job == "verify-policy":
            topo = load_topology(args.config)
            result = verify_policy(topo, args.policy, open_ledger(topo, access), spark=spark, access=access)
        else:
            cfg = load_topology(args.config) if args.config else None
            result = verify(args.source, args.target, args.key.split(","), topology=cfg, fmt=args.format,
                            start_time=args.start_time, end_time=args.end_time, ts_column=args.ts_column,
                            recompare_sleep_s=args.recompare_sleep, report_path=args.report, buckets=args.buckets,
                            spark=spark, ledger=open_ledger(cfg, access) if cfg else None, name=args.name,
                            table=args.table, peer_table=args.peer_table, conn_id=args.conn_id,
                            peer_conn_id=args.peer_conn_id, access=access,
                            ignore_columns=[c for c in args.ignore_columns.split(",") if c],
                            options=CompareOptions(abs_tol=args.abs_tol, rel_tol=args.rel_tol,
                                                   ignore_spaces=args.ignore_spaces, ignore_case=args.ignore_case))
    except DrtError as exc:
        print(f"drt: error: {redact(exc.message)}", file=sys.stderr)
        return exc.exit_code
    sys.stdout.write(json.dumps(result.to_json(), indent=2, sort_keys=True, default=str) + "\n")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
