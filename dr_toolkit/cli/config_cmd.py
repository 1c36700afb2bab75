"""`drt config validate|show`."""

from __future__ import annotations

import typer

from dr_toolkit.cli.common import emit, err_console, out_console, state
from dr_toolkit.errors import ConfigError


def register(app: typer.Typer) -> None:
    config_app = typer.Typer(help="Check and show the topology file.", no_args_is_help=True)

    @config_app.command("validate")
    def validate(ctx: typer.Context) -> None:
        """Validate the topology file: exit 0 when valid, 2 with every problem (file:line and field) when not;
        with --json the problems are also a JSON document on stdout."""
        st = state(ctx)
        try:
            topo = st.configured_topology()
        except ConfigError as exc:
            if st.json:
                problems = exc.problems or [{"file": exc.where, "line": None, "field": None, "problem": exc.what,
                                             "hint": exc.hint}]
                emit(ctx, {"valid": False, "file": st.config, "problems": problems})
            raise
        p = topo.policies
        summary: dict[str, object] = {
            "valid": True, "file": topo.source_file, "hot": topo.hot_name, "cold": topo.cold_name,
            "policies": {"hdfs": len(p.hdfs), "hbase": len(p.hbase), "kafka": len(p.kafka), "verify": len(p.verify)}}
        notes = []
        if topo.cold.zookeeper is None and topo.hot.zookeeper is None:
            notes.append("no ZooKeeper configured: `drt failover run --execute` is refused (fence_hot keeps the "
                         "fencing znode in the cold cluster's ZooKeeper); copies, checks and dry runs work")
        summary["notes"] = notes
        for n in notes:  # stderr: the summary on stdout stays one line
            err_console.print(f"note: {n}", markup=False, highlight=False)
        emit(ctx, summary, lambda s: out_console.print(
            f"[green]valid[/]: {s['file']} — hot [bold]{s['hot']}[/], cold [bold]{s['cold']}[/], policies "
            + ", ".join(f"{k} {v}" for k, v in s["policies"].items())))

    @config_app.command("show")
    def show(ctx: typer.Context) -> None:
        """Print the validated topology with every default filled in (JSON)."""
        topo = state(ctx).configured_topology()
        emit(ctx, topo.model_dump(mode="json"), None)

    app.add_typer(config_app, name="config")
