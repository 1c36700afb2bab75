"""Kafka consumer offsets across the mirror (DESIGN §1.2): checkpoint, lag, remap, apply.

- :func:`checkpoint` records, per protected group and partition on the hot cluster, the
  committed offset and the timestamp and fingerprint of the last consumed record.
- :func:`lag` checks parity (topics and partition counts) and how far the cold mirror is behind.
- :func:`remap` finds, on the cold cluster, where each group must resume; with ``apply`` it
  writes all partitions of the group in one request, only when the group is empty there, and
  never backwards unless forced, with an audit record of before and after.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from dr_toolkit.errors import ConfigError, ProblemFound, UnreachableError
from dr_toolkit.kafka.client import KafkaCluster
from dr_toolkit.kafka.remap import NEXT_PREFIX, Anchor, remap_partition
from dr_toolkit.ledger.store import new_id
from dr_toolkit.secrets import Credentials, lookup

if TYPE_CHECKING:
    from dr_toolkit.ledger import Ledger
    from dr_toolkit.topology import Topology

CredentialsArg = Credentials | Mapping[str, Credentials | None] | None
EMPTY_GROUP_STATES = ("EMPTY", "DEAD")


# -- clusters ----------------------------------------------------------------------------------

def cluster(topology: Topology | None, role: str, *, bootstrap: str | None = None,
            credentials: CredentialsArg = None) -> KafkaCluster:
    """A client for the ``hot`` or ``cold`` cluster of the topology, or for ``bootstrap``."""
    creds: Credentials | None
    if isinstance(credentials, Credentials) or credentials is None:
        creds = credentials
    else:
        creds = credentials.get(role)
    timeout = 10.0
    if topology is not None:
        endpoint = (topology.hot if role == "hot" else topology.cold).kafka
        if endpoint is None and not bootstrap:
            name = topology.hot_name if role == "hot" else topology.cold_name
            raise ConfigError(f"cluster {name!r} ({role}) has no kafka section", where=topology.source_file,
                              hint=f"add clusters.{name}.kafka.bootstrap_servers")
        if endpoint is not None:
            timeout = endpoint.timeout_s
            bootstrap = bootstrap or endpoint.bootstrap_servers
            if creds is None:
                creds = lookup(endpoint.conn_id)
    if not bootstrap:
        raise ConfigError(f"no bootstrap servers for the {role} Kafka cluster",
                          hint="give a topology (--config) or --source-bootstrap/--target-bootstrap")
    return KafkaCluster(bootstrap, credentials=creds, timeout_s=timeout, role=role)


def policy_topics(topology: Topology | None, group: str | None = None) -> list[str]:
    """Topics of the kafka policies (those protecting ``group`` when given)."""
    if topology is None:
        return []
    out: list[str] = []
    for p in topology.policies.kafka:
        if group is None or group in p.groups:
            out.extend(t for t in p.topics if t not in out)
    return out


def policy_groups(topology: Topology | None) -> list[str]:
    out: list[str] = []
    for p in (topology.policies.kafka if topology else []):
        out.extend(g for g in p.groups if g not in out)
    return out


def _partition_counts(c: KafkaCluster, topics: list[str], have: dict[str, int] | None = None) -> dict[str, int]:
    have = c.topics() if have is None else have
    missing = [t for t in topics if t not in have]
    if missing:
        raise ConfigError(f"topic{'s' if len(missing) > 1 else ''} {', '.join(missing)} missing on the "
                          f"{c.role} Kafka cluster", where=c.bootstrap,
                          hint=("create it with the hot cluster's partition count and start mirroring it"
                                if c.role == "cold" else "check the topology's kafka policies"))
    return {t: have[t] for t in topics}


def check_parity(hot: KafkaCluster, cold: KafkaCluster, topics: list[str]) -> dict[str, int]:
    """Topics exist on both sides with equal partition counts (CDAP requires it)."""
    hot_have, cold_have = hot.topics(), cold.topics()  # both answer before anything is judged
    hot_counts = _partition_counts(hot, topics, hot_have)
    cold_counts = _partition_counts(cold, topics, cold_have)
    for t in topics:
        if hot_counts[t] != cold_counts[t]:
            raise ConfigError(f"partition count mismatch for topic {t!r}: hot has {hot_counts[t]}, "
                              f"cold has {cold_counts[t]}", where=f"{hot.bootstrap} / {cold.bootstrap}",
                              hint="offsets can only be carried over between equal partition counts: "
                                   "make the cold topic match the hot one and re-mirror it")
    return hot_counts


# -- checkpoint --------------------------------------------------------------------------------

def checkpoint_rows(c: KafkaCluster, group: str, topics: list[str], counts: Mapping[str, int],
                    taken_at: float | None = None) -> list[dict[str, Any]]:
    """One row per partition: the group's committed offset, and the timestamp, type and
    fingerprint of the last consumed record (offset − 1). Where no record was consumed before
    the committed offset (offset 0, log start), the first unconsumed record is fingerprinted
    instead (prefix ``@next:``); a partition without a commit or without records has none."""
    taken_at = taken_at or time.time()
    committed = c.committed(group)
    rows = []
    for t in topics:
        for p in range(counts[t]):
            lo, hi = c.watermarks(t, p)
            off = committed.get((t, p))
            row: dict[str, Any] = {"group_id": group, "topic": t, "partition_id": p, "committed_offset": off,
                                   "record_timestamp": None, "timestamp_type": "none", "fingerprint": None,
                                   "log_start_offset": lo, "high_watermark": hi, "taken_at": taken_at}
            if off is not None:
                rec = c.record_at(t, p, off - 1, hi) if lo < off <= hi else None
                prefix = ""
                if rec is None or rec.offset != off - 1:
                    nxt = max(off, lo)
                    rec = c.record_at(t, p, nxt, hi) if nxt < hi else None
                    prefix = NEXT_PREFIX
                if rec is not None:
                    row.update(record_timestamp=rec.timestamp, timestamp_type=rec.timestamp_type,
                               fingerprint=prefix + rec.fingerprint)
            rows.append(row)
    return rows


def checkpoint(topology: Topology | None, ledger: Ledger | None, *, groups: list[str] | None = None,
               credentials: CredentialsArg = None, source_bootstrap: str | None = None) -> dict[str, Any]:
    """Checkpoint the protected groups on the hot cluster and store it with
    ``Ledger.add_checkpoint``. Returns ``{checkpoint_id, groups, partitions, taken_at, duration_s}``."""
    t0 = time.monotonic()
    groups = groups if groups is not None else policy_groups(topology)
    if not groups:
        raise ConfigError("no consumer groups to checkpoint", where=topology.source_file if topology else None,
                          hint="list groups under policies.kafka[].groups or pass --group")
    checkpoint_id = new_id("ckpt")
    taken_at = time.time()
    rows: list[dict[str, Any]] = []
    with cluster(topology, "hot", bootstrap=source_bootstrap, credentials=credentials) as hot:
        for g in groups:
            topics = policy_topics(topology, g) or sorted({t for t, _ in hot.committed(g)})
            counts = _partition_counts(hot, topics)
            rows.extend(checkpoint_rows(hot, g, topics, counts, taken_at))
    duration = time.monotonic() - t0
    if ledger is not None and rows:
        ledger.add_checkpoint(checkpoint_id, list(rows))
        for g in groups:
            ledger.set_watermark("kafka", f"checkpoint:{g}", taken_at,
                                 {"checkpoint_id": checkpoint_id, "duration_s": round(duration, 3)})
    return {"checkpoint_id": checkpoint_id, "groups": groups, "taken_at": taken_at,
            "duration_s": round(duration, 3), "partitions": rows}


# -- lag ---------------------------------------------------------------------------------------

def lag(topology: Topology | None, *, topics: list[str] | None = None, credentials: CredentialsArg = None,
        source_bootstrap: str | None = None, target_bootstrap: str | None = None) -> dict[str, Any]:
    """Parity and mirror lag per partition: newest hot record vs newest cold record.

    ``records_behind`` counts the hot records after the one that is newest on cold (found on
    the hot side by timestamp search and fingerprint); ``seconds_behind`` is the difference of
    the two newest records' timestamps (0 when caught up)."""
    topics = topics or policy_topics(topology)
    if not topics:
        raise ConfigError("no topics to check", hint="list topics under policies.kafka[].topics or pass --topic")
    out: list[dict[str, Any]] = []
    with cluster(topology, "hot", bootstrap=source_bootstrap, credentials=credentials) as hot, \
            cluster(topology, "cold", bootstrap=target_bootstrap, credentials=credentials) as cold:
        counts = check_parity(hot, cold, topics)
        for t in topics:
            for p in range(counts[t]):
                out.append(_partition_lag(hot, cold, t, p))
    behind = [r["seconds_behind"] for r in out]
    return {"topics": topics, "partitions": out, "caught_up": all(r["records_behind"] == 0 for r in out),
            "max_seconds_behind": max(behind) if behind else 0.0}


def _partition_lag(hot: KafkaCluster, cold: KafkaCluster, t: str, p: int) -> dict[str, Any]:
    hlo, hhi = hot.watermarks(t, p)
    clo, chi = cold.watermarks(t, p)
    hot_new = hot.record_at(t, p, hhi - 1, hhi) if hhi > hlo else None
    cold_new = cold.record_at(t, p, chi - 1, chi) if chi > clo else None
    row: dict[str, Any] = {"topic": t, "partition": p, "hot_end": hhi, "cold_end": chi, "records_behind": 0,
                           "seconds_behind": 0.0, "hot_newest_ts": hot_new.timestamp if hot_new else None,
                           "cold_newest_ts": cold_new.timestamp if cold_new else None, "method": "empty"}
    if hot_new is None:
        return row
    if cold_new is None:
        first = hot.record_at(t, p, hlo, hhi)
        row.update(records_behind=hhi - hlo,
                   seconds_behind=max(0.0, (hot_new.timestamp - (first.timestamp if first else hot_new.timestamp))
                                      / 1000.0))
        return row
    if (cold_new.timestamp, cold_new.fingerprint) == (hot_new.timestamp, hot_new.fingerprint):
        # Fast path (most partitions, most of the time): both newest records are the same record.
        # Cold holds hot's last record unless hot ends with more identical copies of it than cold
        # does: compare the lengths of the trailing runs of that record (no search needed).
        k = _trailing_run(hot, t, p, hlo, hhi, hot_new)
        j = 1 if k == 1 else _trailing_run(cold, t, p, clo, chi, cold_new)
        if k is not None and j is not None:
            row.update(method="exact", records_behind=max(0, k - j))
            return row
    r = remap_partition(hot, t, p, Anchor(cold_new.timestamp, cold_new.fingerprint), hlo, hhi)
    behind = max(0, hhi - (r.target_offset if r.target_offset is not None else hhi))
    row.update(records_behind=behind, method=r.method,
               seconds_behind=max(0.0, (hot_new.timestamp - cold_new.timestamp) / 1000.0) if behind else 0.0)
    return row


def _trailing_run(c: KafkaCluster, t: str, p: int, lo: int, hi: int, newest: Any, cap: int = 50) -> int | None:
    """How many records at the end of the partition are identical to ``newest`` (timestamp and
    fingerprint); None when the run is longer than ``cap`` (the caller then searches)."""
    n, off = 1, hi - 2
    while off >= lo:
        r = c.record_at(t, p, off, off + 1)
        if r is None or (r.timestamp, r.fingerprint) != (newest.timestamp, newest.fingerprint):
            return n
        n, off = n + 1, off - 1
        if n >= cap:
            return None
    return n


# -- remap and apply ---------------------------------------------------------------------------

def _anchor(row: Mapping[str, Any]) -> Anchor | None:
    fp, ts = row.get("fingerprint"), row.get("record_timestamp")
    if not fp or ts is None:
        return None
    if fp.startswith(NEXT_PREFIX):
        return Anchor(int(ts), fp[len(NEXT_PREFIX):], after=False)
    return Anchor(int(ts), fp, after=True)


def remap_rows(cold: KafkaCluster, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Remap checkpoint rows onto the cold cluster (parity checked by the caller)."""
    out = []
    for row in rows:
        t, p, off = row["topic"], int(row["partition_id"]), row["committed_offset"]
        item: dict[str, Any] = {"topic": t, "partition": p, "source_offset": off,
                                "source_timestamp": row.get("record_timestamp")}
        if off is None:
            item.update(target_offset=None, method="none", probes=0, duplicate_window=None)
        else:
            lo, hi = cold.watermarks(t, p)
            item.update(remap_partition(cold, t, p, _anchor(row), lo, hi).as_dict())
        out.append(item)
    return out


def remap(topology: Topology | None, ledger: Ledger | None, group: str, *, apply: bool = False,
          force: bool = False, source_bootstrap: str | None = None, target_bootstrap: str | None = None,
          run_id: str | None = None, credentials: CredentialsArg = None) -> dict[str, Any]:
    """Remap ``group`` onto the cold cluster; with ``apply`` write it there (see module doc).

    The checkpoint is the newest in the ledger, or a fresh one taken from the source cluster
    when ``source_bootstrap`` is given or the ledger has none."""
    rows: list[dict[str, Any]] = []
    checkpoint_id = None
    if ledger is not None and not source_bootstrap:
        rows = ledger.latest_checkpoint(group)
        checkpoint_id = rows[0]["checkpoint_id"] if rows else None
    if not rows:
        try:
            ck = checkpoint(topology, ledger, groups=[group], credentials=credentials,
                            source_bootstrap=source_bootstrap)
        except UnreachableError as exc:
            raise UnreachableError(f"no checkpoint of group {group!r} in the ledger and the source cluster "
                                   f"is unreachable: {exc.what}", where=exc.where,
                                   hint="run `drt kafka checkpoint` while the hot cluster is up") from None
        rows, checkpoint_id = ck["partitions"], ck["checkpoint_id"]
    with cluster(topology, "cold", bootstrap=target_bootstrap, credentials=credentials) as cold:
        counts = _partition_counts(cold, sorted({r["topic"] for r in rows}))
        for t, n in counts.items():
            source_n = len({r["partition_id"] for r in rows if r["topic"] == t})
            if source_n != n:
                raise ConfigError(f"partition count mismatch for topic {t!r}: hot has {source_n}, cold has {n}",
                                  where=cold.bootstrap, hint="make the cold topic match the hot one")
        parts = remap_rows(cold, rows)
        result: dict[str, Any] = {"group": group, "checkpoint_id": checkpoint_id, "applied": False,
                                  "target": cold.bootstrap, "partitions": parts}
        offsets = {(r["topic"], r["partition"]): int(r["target_offset"]) for r in parts
                   if r["target_offset"] is not None and r["method"] != "none"}
        if not apply:
            before = cold.committed(group)
            if ledger is not None:
                ledger.audit(component="kafka", action="remap", dry_run=True, status="planned",
                             target=f"{group}@{cold.bootstrap}", run_id=run_id,
                             before=_offsets_json(before), after=_offsets_json(offsets))
            return result
        result.update(apply_offsets(cold, group, offsets, force=force, ledger=ledger, run_id=run_id))
        return result


def _offsets_json(offsets: Mapping[tuple[str, int], int]) -> dict[str, int]:
    return {f"{t}[{p}]": o for (t, p), o in sorted(offsets.items())}


def apply_offsets(cold: KafkaCluster, group: str, offsets: Mapping[tuple[str, int], int], *, force: bool = False,
                  ledger: Ledger | None = None, run_id: str | None = None,
                  on_commit: Callable[[], None] | None = None, deadline_s: float | None = None) -> dict[str, Any]:
    """Write ``offsets`` for ``group`` on ``cold``: all partitions in one commit request or none.

    Refuses (ProblemFound, nothing written) when the group has members or a partition would
    move backwards (unless ``force``). When the broker fails during the commit, the commit
    (idempotent) is retried until ``deadline_s`` and the result read back, so the group ends
    fully old or fully new; a state that stays mixed is reported (re-running completes it).
    ``on_commit`` is called just before the request is sent (progress and fault injection)."""
    target = f"{group}@{cold.bootstrap}"

    def audit(status: str, before: Any, after: Any, message: str) -> None:
        if ledger is not None:
            ledger.audit(component="kafka", action="apply_offsets", dry_run=False, status=status, target=target,
                         run_id=run_id, before=before, after=after, message=message)

    if not offsets:
        audit("skipped", None, None, "no partition has a committed offset to carry over")
        return {"applied": True, "written": 0,
                "reason": "the group has no committed offset on the source: nothing to carry over"}
    parts = list(offsets)
    state, members = cold.group_state(group)
    before = cold.committed(group, parts)
    if members or state not in EMPTY_GROUP_STATES:
        msg = (f"group {group!r} is not empty on the cold cluster (state {state}, {members} member(s)): "
               "nothing written")
        audit("failed", _offsets_json(before), None, msg)
        raise ProblemFound(msg, where=cold.bootstrap, hint="stop the group's consumers on the cold cluster, "
                                                           "then apply again")
    backwards = {tp: (before[tp], o) for tp, o in offsets.items() if tp in before and o < before[tp]}
    if backwards and not force:
        listed = ", ".join(f"{t}[{p}] {b}→{n}" for (t, p), (b, n) in sorted(backwards.items()))
        msg = f"applying would move committed offsets of group {group!r} backwards ({listed}): nothing written"
        audit("failed", _offsets_json(before), _offsets_json(offsets), msg)
        raise ProblemFound(msg, where=cold.bootstrap, hint="check the checkpoint; pass --force to move back "
                                                           "anyway (consumers will re-read those records)")
    deadline = time.monotonic() + (deadline_s if deadline_s is not None else max(30.0, 3 * cold.timeout_s))
    last_error = ""
    if on_commit is not None:
        on_commit()
    while True:
        try:
            errors = cold.commit(group, offsets)
            refused = {tp: e for tp, e in errors.items() if e}
            if refused:
                last_error = "; ".join(f"{t}[{p}]: {e}" for (t, p), e in sorted(refused.items()))
                break  # the broker refused it: do not retry, read back what it holds
        except UnreachableError as exc:
            last_error = exc.what
            if time.monotonic() > deadline:
                break
            cold.close()  # a fresh connection: a restarted broker is reached at once, not after backoff
            time.sleep(0.5)
            continue
        break
    while True:  # read back what the broker holds (it may still be loading after a restart)
        try:
            after = cold.committed(group, parts)
            break
        except UnreachableError as exc:
            if time.monotonic() > deadline:
                msg = f"commit of group {group!r} not confirmed: {last_error or exc.what}"
                audit("failed", _offsets_json(before), None, msg)
                raise UnreachableError(msg, where=cold.bootstrap,
                                       hint="when the broker is back, run the remap with --apply again "
                                            "(it completes or confirms the commit)") from None
            cold.close()
            time.sleep(0.5)
    fully_new = all(after.get(tp) == o for tp, o in offsets.items())
    fully_old = all(after.get(tp) == before.get(tp) for tp in parts)
    if fully_new:
        audit("done", _offsets_json(before), _offsets_json(after), f"applied {len(offsets)} partition(s)")
        return {"applied": True, "written": len(offsets), "before": _offsets_json(before),
                "after": _offsets_json(after)}
    state_word = "unchanged" if fully_old else "MIXED (some partitions new, some old)"
    msg = f"commit of group {group!r} failed ({last_error or 'not confirmed'}); the group is {state_word}"
    audit("failed", _offsets_json(before), _offsets_json(after), msg)
    raise ProblemFound(msg, where=cold.bootstrap, hint="fix the cause and apply again")
