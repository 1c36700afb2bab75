"""Retention of the ledger: what :meth:`Ledger.prune <dr_toolkit.ledger.Ledger.prune>` (`drt ledger
prune`) deletes, and what it never deletes.

How long each kind of row is kept is the topology's ``ledger.retention``
(:class:`dr_toolkit.topology.Ledger.Retention`; defaults: copy runs and their manifests rows 90
days, Kafka checkpoints 14 days beyond the newest 10 of each group, verification reports 365
days beyond the newest 50 of each dataset, gate checks 90 days, audit rows that are not a
decision's 365 days). Whatever the settings, these rows are **never deleted**:

- ``failover_runs`` (every failover and re-protect run) and the audit of decisions: every audit
  row of components ``failover``, ``direction``, ``reprotect``, ``switchover``, and every audit row of
  a failover run (its ``run_id`` in ``failover_runs``: the approval or rejection, the offsets it
  applied, ...);
- per copy pair (policy, source, target): its newest run (`drt status`), its latest *completed*
  run and every run started after it — ``copy.signals.last_completed`` (the gate's and the
  unplanned failover's reader) reads that run and walks the manifests from the newest one back
  to its manifest (:func:`completed_run` is the same test as the gate's); a run still ``running``;
- manifests rows: the newest of each source/target (the next run's base, ``copy.run.base_of``),
  every one created since the oldest run kept for the pair's chain, and every one a kept run
  names (its own manifest and its base);
- the newest ``checkpoints_keep_last`` checkpoints of each group (the gate, remap and failover read
  the newest: ``Ledger.latest_checkpoints``);
- the newest ``verify_keep_last`` reports of each dataset (the verify gate reads the newest 50 of a
  policy's name; `drt status` the newest of each);
- the newest gate check (`drt status`'s last check);
- ``watermarks``, ``leases``, ``schema_version``: one row per name, never pruned.

Every delete is batched: at most ``batch`` rows per transaction, oldest first, each transaction
committed before the next, so a prune of a large ledger holds no long lock and a copy, a check or
a checkpoint writes between its batches. Rows a concurrent writer adds are newer than every row
deleted; a run that completes meanwhile only moves its pair's floor forward (more kept, never
less). A dry run counts the same rows and deletes none.

Memory: per copy pair, the manifest ids the kept runs name (the retention window's runs); per
Kafka group, its checkpoints' ids — not the ledger's size.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dr_toolkit.topology import Ledger as LedgerSettings

DAY_S = 86400.0
#: audit components whose rows are decisions (kept for ever, whatever ``audit_days``)
DECISION_COMPONENTS = ("failover", "direction", "reprotect", "switchover")
#: the tables :func:`prune` reports on, in its order (failover_runs: always 0, never deleted)
TABLES = ("replication_runs", "manifests", "kafka_checkpoints", "verify_reports", "gate_checks",
          "audit_events", "failover_runs")
_IN_CHUNK = 500  # ids per IN (...) list
_PAGE = 200  # succeeded runs read per page while looking for a pair's latest completed run

Tx = Callable[[], AbstractContextManager[Any]]
Key = tuple[str | None, str, str]


def completed_run(status: str, manifest_id: str | None, detail: Any) -> bool:
    """The run copied everything it listed, whole — the same test as the gate's
    (``copy.signals._is_completed``, which the ledger, a layer below, cannot import; a test
    checks they agree): succeeded, a manifest, no file open for write, its listing not unproven."""
    if isinstance(detail, str):
        detail = json.loads(detail)
    detail = detail or {}
    return status == "succeeded" and bool(manifest_id) and not int(detail.get("files_open") or 0) \
        and detail.get("listing_proven") is not False


def cutoff(now: float, days: float | None) -> float | None:
    """The time before which rows may go (None: kept for ever)."""
    return None if days is None else now - float(days) * DAY_S


def prune(tx: Tx, settings: LedgerSettings.Retention, *, now: float, dry_run: bool,
          batch: int | None = None) -> dict[str, int]:
    """Delete (or, ``dry_run``, count) the rows past ``settings``' retention at ``now``; rows per
    table (see the module doc for what is never deleted)."""
    p = _Pruner(tx, now=now, dry_run=dry_run, batch=int(batch or settings.batch))
    runs_cut = cutoff(now, settings.runs_days)
    out = dict.fromkeys(TABLES, 0)
    out["replication_runs"], floors = p.runs(runs_cut)
    out["manifests"] = p.manifests(runs_cut, floors)
    out["kafka_checkpoints"] = p.checkpoints(cutoff(now, settings.checkpoints_days), settings.checkpoints_keep_last)
    verify_cut = cutoff(now, settings.verify_days)
    for where, params in p.verify_datasets():
        out["verify_reports"] += p.keep_newest("verify_reports", "report_id", "finished_at", where, params,
                                               verify_cut, settings.verify_keep_last)
    out["gate_checks"] = p.keep_newest("gate_checks", "check_id", "checked_at", "1 = 1", {},
                                       cutoff(now, settings.gate_checks_days), 1)
    out["audit_events"] = p.audit(cutoff(now, settings.audit_days))
    return out


def _key_where(key: Key) -> tuple[str, dict[str, Any]]:
    policy, source, target = key
    params: dict[str, Any] = {"ks": source, "kt": target}
    if policy is None:
        return "policy IS NULL AND source = :ks AND target = :kt", params
    params["kp"] = policy
    return "policy = :kp AND source = :ks AND target = :kt", params


def _chunks(items: list[Any], n: int = _IN_CHUNK) -> Iterator[list[Any]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def _in(name: str, values: list[Any]) -> tuple[str, dict[str, Any]]:
    params = {f"{name}{i}": v for i, v in enumerate(values)}
    return ", ".join(f":{k}" for k in params), params


class _Pruner:
    def __init__(self, tx: Tx, *, now: float, dry_run: bool, batch: int) -> None:
        self.tx, self.now, self.dry_run, self.batch = tx, now, dry_run, max(1, batch)

    def _rows(self, sql: str, **params: Any) -> list[dict[str, Any]]:
        from sqlalchemy import text

        with self.tx() as conn:
            return [dict(r._mapping) for r in conn.execute(text(sql), params)]

    def _delete(self, table: str, pk: str, where: str, params: Mapping[str, Any], order: str) -> int:
        """Delete the rows of ``table`` matching ``where``, oldest first, ``batch`` per
        transaction (a dry run counts them)."""
        from sqlalchemy import text

        if self.dry_run:
            return int(self._rows(f"SELECT COUNT(*) AS n FROM {table} WHERE {where}", **params)[0]["n"])
        total = 0
        sql = text(f"DELETE FROM {table} WHERE {pk} IN (SELECT {pk} FROM {table} WHERE {where} "
                   f"ORDER BY {order} LIMIT {self.batch})")
        while True:
            with self.tx() as conn:
                n = int(conn.execute(sql, dict(params)).rowcount)
            total += n
            if n < self.batch:
                return total

    # -- copy runs and manifests -------------------------------------------------------------------
    def _latest_completed(self, where: str, params: dict[str, Any]) -> float | None:
        """The start time of the pair's newest completed run (:func:`completed_run`), read a page of
        succeeded runs at a time, newest first."""
        after: dict[str, Any] | None = None
        while True:
            page_where = where + " AND status = 'succeeded' AND manifest_id IS NOT NULL"
            extra: dict[str, Any] = {}
            if after is not None:
                page_where += " AND (started_at < :at OR (started_at = :at AND run_id < :ar))"
                extra = {"at": after["started_at"], "ar": after["run_id"]}
            page = self._rows(f"SELECT run_id, started_at, status, manifest_id, detail FROM replication_runs "
                              f"WHERE {page_where} ORDER BY started_at DESC, run_id DESC LIMIT {_PAGE}",
                              **params, **extra)
            for r in page:
                if completed_run(r["status"], r["manifest_id"], r["detail"]):
                    return float(r["started_at"])
            if len(page) < _PAGE:
                return None
            after = page[-1]

    def runs(self, cut: float | None) -> tuple[int, dict[Key, float | None]]:
        """Prune ``replication_runs`` per pair; returns the count and each pair's *kept-from* time:
        runs started at or after it stay (None: every run stays)."""
        floors: dict[Key, float | None] = {}
        total = 0
        keys = self._rows("SELECT DISTINCT policy, source, target FROM replication_runs")
        for k in keys:
            key: Key = (k["policy"], k["source"], k["target"])
            where, params = _key_where(key)
            if cut is None:
                floors[key] = None
                continue
            newest = self._rows(f"SELECT MAX(started_at) AS m FROM replication_runs WHERE {where}", **params)[0]["m"]
            done = self._latest_completed(where, params)
            # the newest run (drt status) and, from the latest completed run on, every run (the gate's chain)
            keep_from = min(cut, float(done if done is not None else newest))
            floors[key] = keep_from
            total += self._delete("replication_runs", "run_id",
                                  f"{where} AND started_at < :before AND status <> 'running'",
                                  {**params, "before": keep_from}, "started_at, run_id")
        return total, floors

    def _held_manifests(self, pair_keys: list[Key], floors: dict[Key, float | None]) -> set[str]:
        """The manifest ids the kept runs of these pairs name (their own and their base)."""
        held: set[str] = set()
        for key in pair_keys:
            where, params = _key_where(key)
            keep_from = floors.get(key)
            if keep_from is None:
                cond, extra = "1 = 1", {}
            else:
                cond, extra = "(started_at >= :kf OR status = 'running')", {"kf": keep_from}
            for r in self._rows(f"SELECT manifest_id, base_manifest_id FROM replication_runs WHERE {where} "
                                f"AND {cond}", **params, **extra):
                held.update(m for m in (r["manifest_id"], r["base_manifest_id"]) if m)
        return held

    def manifests(self, cut: float | None, floors: dict[Key, float | None]) -> int:
        """Prune ``manifests`` per (policy, source, target), as its runs were (see the module doc)."""
        if cut is None:
            return 0
        total = 0
        keys = self._rows("SELECT policy, source, target, MAX(created_at) AS newest FROM manifests "
                          "GROUP BY policy, source, target")
        newest: dict[tuple[str, str], float] = {}
        for k in keys:
            pair = (k["source"], k["target"])
            newest[pair] = max(newest.get(pair, float(k["newest"])), float(k["newest"]))
        held_of: dict[tuple[str, str], set[str]] = {}
        for k in keys:
            key: Key = (k["policy"], k["source"], k["target"])
            pair = (key[1], key[2])
            # older than the cutoff, than the pair's newest manifest (the next run's base, whatever
            # the policy) and than this key's oldest kept run (the gate's chain, a manifest no run names
            # included)
            keep_from = floors.get(key)
            before = min(cut, newest[pair], cut if keep_from is None else keep_from)
            if pair not in held_of:
                held_of[pair] = self._held_manifests([f for f in floors if (f[1], f[2]) == pair], floors)
            held = held_of[pair]
            where, params = _key_where(key)
            last: dict[str, Any] | None = None
            while True:
                extra: dict[str, Any] = {}
                page_where = f"{where} AND created_at < :b"
                if last is not None:
                    page_where += " AND (created_at > :lc OR (created_at = :lc AND manifest_id > :lm))"
                    extra = {"lc": last["created_at"], "lm": last["manifest_id"]}
                page = self._rows(f"SELECT manifest_id, created_at FROM manifests WHERE {page_where} "
                                  f"ORDER BY created_at, manifest_id LIMIT {self.batch}",
                                  **params, b=before, **extra)
                keep = [r["manifest_id"] for r in page if r["manifest_id"] in held]
                if len(keep) < len(page) and not self.dry_run:
                    self._delete_page(where, params, page[0], page[-1], keep)
                total += len(page) - len(keep)
                if len(page) < self.batch:
                    break
                last = page[-1]
        return total

    def _delete_page(self, where: str, params: dict[str, Any], first: dict[str, Any], last: dict[str, Any],
                     keep: list[str]) -> None:
        """Delete one page of manifests rows (``first`` to ``last`` in created_at, manifest_id
        order: no row is added before the cutoff) but ``keep``, in one transaction."""
        from sqlalchemy import text

        marks, named = _in("h", keep)
        sql = (f"DELETE FROM manifests WHERE {where} AND (created_at > :fc OR (created_at = :fc AND manifest_id >= :fm))"
               " AND (created_at < :lc OR (created_at = :lc AND manifest_id <= :lm))"
               + (f" AND manifest_id NOT IN ({marks})" if keep else ""))
        with self.tx() as conn:
            conn.execute(text(sql), {**params, **named, "fc": first["created_at"], "fm": first["manifest_id"],
                                     "lc": last["created_at"], "lm": last["manifest_id"]})

    def _delete_ids(self, table: str, pk: str, ids: list[Any], where: str = "1 = 1",
                    params: Mapping[str, Any] | None = None) -> None:
        """Delete these ids in one transaction (the caller bounds how many)."""
        from sqlalchemy import text

        with self.tx() as conn:
            for part in _chunks(ids):
                marks, named = _in("i", part)
                conn.execute(text(f"DELETE FROM {table} WHERE {where} AND {pk} IN ({marks})"),
                             {**(params or {}), **named})

    # -- kafka checkpoints -------------------------------------------------------------------------
    def checkpoints(self, cut: float | None, keep_last: int) -> int:
        """Per group: every checkpoint taken before the cutoff but its newest ``keep_last``.
        A checkpoint is deleted whole: small ones several to a transaction (at most ``batch``
        rows), one larger than ``batch`` over several."""
        if cut is None:
            return 0
        from sqlalchemy import text

        total = 0
        for g in [r["group_id"] for r in self._rows("SELECT DISTINCT group_id FROM kafka_checkpoints")]:
            cps = self._rows("SELECT checkpoint_id, MAX(taken_at) AS t, COUNT(*) AS n FROM kafka_checkpoints "
                             "WHERE group_id = :g GROUP BY checkpoint_id", g=g)
            # newest first as Ledger.latest_checkpoint orders them (taken_at, then checkpoint_id)
            cps.sort(key=lambda c: (float(c["t"]), str(c["checkpoint_id"])), reverse=True)
            victims = [c for c in cps[max(1, keep_last):] if float(c["t"]) < cut]
            victims.reverse()  # oldest first
            total += sum(int(c["n"]) for c in victims)
            if self.dry_run:
                continue
            pending: list[str] = []
            rows = 0
            for c in victims:
                n = int(c["n"])
                if n > self.batch:
                    big = text("DELETE FROM kafka_checkpoints WHERE group_id = :g AND checkpoint_id = :c AND "
                               "(topic, partition_id) IN (SELECT topic, partition_id FROM kafka_checkpoints "
                               f"WHERE group_id = :g AND checkpoint_id = :c LIMIT {self.batch})")
                    while True:
                        with self.tx() as conn:
                            if int(conn.execute(big, {"g": g, "c": c["checkpoint_id"]}).rowcount) < self.batch:
                                break
                    continue
                if rows + n > self.batch:
                    self._delete_ids("kafka_checkpoints", "checkpoint_id", pending, "group_id = :g", {"g": g})
                    pending, rows = [], 0
                pending.append(c["checkpoint_id"])
                rows += n
            if pending:
                self._delete_ids("kafka_checkpoints", "checkpoint_id", pending, "group_id = :g", {"g": g})
        return total

    # -- verification reports, gate checks ---------------------------------------------------------
    def verify_datasets(self) -> list[tuple[str, dict[str, Any]]]:
        """One filter per dataset: a verify policy's name, or the source of unnamed reports."""
        named = [("name = :vn", {"vn": r["name"]})
                 for r in self._rows("SELECT DISTINCT name FROM verify_reports WHERE name IS NOT NULL")]
        unnamed = [("name IS NULL AND source = :vs", {"vs": r["source"]})
                   for r in self._rows("SELECT DISTINCT source FROM verify_reports WHERE name IS NULL")]
        return named + unnamed

    def keep_newest(self, table: str, pk: str, at: str, where: str, params: dict[str, Any], cut: float | None,
                    keep: int) -> int:
        """Delete the rows matching ``where`` older than ``cut`` except the newest ``keep``
        (newest by ``at``, then ``pk``)."""
        if cut is None:
            return 0
        kth = self._rows(f"SELECT {at} AS a, {pk} AS k FROM {table} WHERE {where} ORDER BY {at} DESC, {pk} DESC "
                         f"LIMIT 1 OFFSET {max(1, keep) - 1}", **params)
        if not kth:
            return 0
        return self._delete(table, pk, f"{where} AND {at} < :cut AND ({at} < :ka OR ({at} = :ka AND {pk} < :kk))",
                            {**params, "cut": cut, "ka": kth[0]["a"], "kk": kth[0]["k"]}, f"{at}, {pk}")

    # -- audit -------------------------------------------------------------------------------------
    def audit(self, cut: float | None) -> int:
        """Audit rows older than the cutoff that are no decision's (module doc)."""
        if cut is None:
            return 0
        marks, named = _in("dc", list(DECISION_COMPONENTS))
        return self._delete("audit_events", "event_id",
                            f"at < :cut AND component NOT IN ({marks}) AND (run_id IS NULL OR run_id NOT IN "
                            "(SELECT run_id FROM failover_runs))", {"cut": cut, **named}, "at, event_id")
