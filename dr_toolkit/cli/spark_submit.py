"""spark-submit entry point: run a verification on a Spark cluster instead of in-process.

The Airflow task and `drt verify` run Spark in their own process (local mode by default). On
a cluster, submit the same job; the session spark-submit creates is the one used::

    # dr_toolkit must be importable on the driver: pip-install it there, or ship it (its
    # dependencies must be installed on driver and executors, or shipped with --archives)
    python -m zipfile -c dr_toolkit.zip dr_toolkit
    spark-submit --master yarn --deploy-mode client --py-files dr_toolkit.zip \\
        dr_toolkit/cli/spark_submit.py verify-policy orders-table --config drt.yaml

    spark-submit --master yarn --py-files dr_toolkit.zip dr_toolkit/cli/spark_submit.py verify \\
        --request '{"source": "hdfs://hot/warehouse/orders", "target": "hdfs://cold/warehouse/orders",
                    "key": ["order_id"], "report_path": "/reports/orders.html"}' --config drt.yaml

``--request`` is one :class:`dr_toolkit.verify.request.VerifyRequest` as JSON (or ``@FILE`` holding
it): the fields are ``drt verify``'s options by name (``key``, ``format``, ``ts_column``,
``start_time``, ``abs_tol``, ``families``, …; see the class), parsed and checked by the same code
as the CLI's. Credentials come from ``AIRFLOW_CONN_<CONN_ID>`` on the driver.

spark-submit's master and configuration win: :func:`dr_toolkit.spark.session.get_session`
only fills in the keys it left unset. It prints the result JSON (docs/contracts.md, ``drt verify``) on stdout and exits 0 (no difference),
1 (BADROWS > 0) or 2 (bad input), so a scheduler (an Airflow ``SparkSubmitOperator``) sees
the outcome. With ``--config`` the result is recorded in the topology's ledger.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dr_toolkit.access import Access
from dr_toolkit.errors import EXIT_OK, EXIT_PROBLEM, ConfigError, DrtError
from dr_toolkit.ledger import open_ledger
from dr_toolkit.secrets import redact
from dr_toolkit.spark.session import get_session
from dr_toolkit.topology import load_topology
from dr_toolkit.verify.api import verify, verify_policy
from dr_toolkit.verify.request import VerifyRequest


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="spark_submit.py", description="dr-toolkit Spark jobs (spark-submit entry point)")
    sub = p.add_subparsers(dest="job", required=True)
    v = sub.add_parser("verify", help="compare a dataset with its replica by key")
    v.add_argument("--request", required=True, help="the verification as JSON (VerifyRequest), or @FILE holding it")
    v.add_argument("--config", help="topology file (for hdfs://<cluster> paths and the ledger)")
    pv = sub.add_parser("verify-policy", help="run a verify policy of the topology")
    pv.add_argument("policy")
    pv.add_argument("--config", help="topology file (default $DRT_CONFIG or ./drt.yaml)")
    return p


def request_of(text: str) -> VerifyRequest:
    """``--request``: the JSON text, or ``@FILE`` holding it (ConfigError, exit 2, in one line)."""
    where = "--request"
    if text.startswith("@"):
        where = text[1:]
        try:
            text = Path(where).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"the request file cannot be read: {exc.strerror}", where=where) from None
    return VerifyRequest.parse(text, where=where)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        access = Access.from_env()
        if args.job == "verify-policy":
            topo = load_topology(args.config)
            spark = get_session(app_name="drt-verify")  # spark-submit's master and conf; we fill in unset keys
            result = verify_policy(topo, args.policy, open_ledger(topo, access), spark=spark, access=access)
        else:
            request = request_of(args.request)  # checked before Spark starts
            cfg = load_topology(args.config) if args.config else None
            ledger = open_ledger(cfg, access) if cfg else None
            if request.wants_recovery_point:
                # the gate and its signals (copy, Kafka, HBase modules): only with as_of gate
                from dr_toolkit.failover.gate import verify_as_of

                request = request.at(verify_as_of(cfg, ledger, access))
            spark = get_session(app_name="drt-verify")
            result = verify(request, access=access, topology=cfg, ledger=ledger, spark=spark)
    except DrtError as exc:
        print(f"drt: error: {redact(exc.message)}", file=sys.stderr)
        return exc.exit_code
    sys.stdout.write(json.dumps(result.to_json(), indent=2, sort_keys=True, default=str) + "\n")
    return EXIT_OK if result.ok else EXIT_PROBLEM


if __name__ == "__main__":
    sys.exit(main())
