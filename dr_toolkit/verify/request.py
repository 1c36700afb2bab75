"""What a verification is asked to do: one value, built by every front door.

:class:`VerifyRequest` holds every option of a verification — a superset of a verify policy's
fields (``drt verify``'s options, a policy of the topology, the JSON a spark-submit job is
given). Its defaults are decided here and nowhere else; the checks that need no server (a
missing key, options that do not go together, a time that is not a time) are made when it is
built, with the CLI's wording, as a ConfigError (exit 2). What it does not hold is where it
runs: the topology, the ledger, the credentials (``access``) and the Spark session are the
caller's.

- ``drt verify SRC DST --key …`` builds it from its options (:mod:`dr_toolkit.cli.verify`);
- a verify policy (``drt verify --policy``, the Airflow DAGs, the runbook) through
  :func:`policy_request`;
- ``spark-submit dr_toolkit/cli/spark_submit.py verify --request JSON`` from :meth:`VerifyRequest.to_json`'s
  form (the fields below, by name; a comma-separated string is taken for every list).

``fingerprint()`` is what a report stores as ``request``: the gate counts a report for a verify
policy only when it equals what the policy asks (:mod:`dr_toolkit.verify.signals`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import time
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from dr_toolkit.errors import ConfigError
from dr_toolkit.verify.canon import CompareOptions
from dr_toolkit.verify.hbase import make_scan

if TYPE_CHECKING:
    from dr_toolkit.topology import VerifyPolicy

DEFAULT_BUCKETS = 32768
RECOVERY_POINT = "recovery-point"
HBASE = "hbase://"
HBASE_FIELDS = ("families", "row_prefixes", "versions", "read", "hbase_rootdir", "raw")
_OPTION = {"hbase_rootdir": "hbase-rootdir"}  # field -> its CLI option (else the field, - for _)


def parse_time(value: str | float | None, option: str) -> float | None:
    """Epoch seconds from ``1700000000``, ``2024-05-01``, ``2024-05-01T12:00:00Z`` (UTC if no zone)."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value)
    except ValueError:
        pass
    try:
        t = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{option} {value!r} is not a time",
                          hint="use ISO 8601 (2024-05-01T12:00:00Z) or epoch seconds") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return t.timestamp()


def _digest(uri: str) -> str:
    return hashlib.sha256(uri.encode()).hexdigest()[:16]


class VerifyRequest(BaseModel):
    """Every option of one verification (see the module doc). Times are ISO 8601 or epoch seconds;
    ``as_of`` may also be ``recovery-point``, which the front door resolves to a time through the
    failover gate before the verification runs (:meth:`at`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    target: str
    key: list[str] = Field(default_factory=list, description="key columns (none for hbase://: the row key)")
    format: str = "parquet"
    peer_format: str | None = None
    table: str | None = None  # JDBC table (both sides)
    peer_table: str | None = None
    conn_id: str | None = None  # connection with the JDBC user/password
    peer_conn_id: str | None = None
    ignore_columns: list[str] = Field(default_factory=list)
    ts_column: str | None = None
    start_time: str | float | None = None
    end_time: str | float | None = None
    as_of: str | float | None = None
    recompare_sleep_s: float = 0.0
    abs_tol: float = 0.0
    rel_tol: float = 0.0
    ignore_spaces: bool = False
    ignore_case: bool = False
    buckets: int = DEFAULT_BUCKETS
    sample_size: int = 20
    report_path: str | None = None
    name: str | None = None
    report_id: str | None = None
    who: str | None = None
    spark_master: str | None = None
    # hbase:// tables only
    families: list[str] = Field(default_factory=list)
    row_prefixes: list[str] = Field(default_factory=list)
    versions: int | str | None = None
    raw: bool = False
    read: str | None = None
    hbase_rootdir: list[str] = Field(default_factory=list)

    @field_validator("key", "ignore_columns", "families", "row_prefixes", "hbase_rootdir", mode="before")
    @classmethod
    def _listed(cls, v: Any) -> Any:
        """A comma-separated string is a list (the CLI's spelling); blanks are dropped."""
        items = v.split(",") if isinstance(v, str) else v
        return [x.strip() for x in items if x and x.strip()] if isinstance(items, list | tuple) else items

    @model_validator(mode="after")
    def _check(self) -> VerifyRequest:
        if self.is_hbase:
            if self.key or self.ts_column:
                raise ConfigError("hbase:// tables take no --key/--ts-column: the row key is the key and "
                                  "--start-time/--end-time bound the cells' timestamps")
        else:
            given = [f for f in HBASE_FIELDS if getattr(self, f) not in (None, False, [])]
            if given:
                raise ConfigError(f"--{_OPTION.get(given[0], given[0].replace('_', '-'))} is for hbase:// tables only")
            if not self.key:
                raise ConfigError("missing --key", hint="name the key column(s): --key id or --key a,b")
        if self.as_of not in (None, "") and self.end_time not in (None, ""):
            raise ConfigError("--as-of and --end-time both set the end of the window: give one")
        start, end = self.start(), parse_time(self.end_time, "--end-time")
        if not self.is_hbase:
            if (start is not None or end is not None) and not self.ts_column:
                raise ConfigError("a time window needs the timestamp column", hint="pass --ts-column COL")
            if start is not None and end is not None and end <= start:
                raise ConfigError(f"--end-time {self.end_time} is not after --start-time {self.start_time}")
        if self.buckets < 1:
            raise ConfigError(f"buckets must be at least 1, not {self.buckets}")
        self.options()  # the tolerances' own check
        return self

    # -- what it asks, read ------------------------------------------------------------------------
    @property
    def is_hbase(self) -> bool:
        """Two HBase tables, compared cell by cell (either side ``hbase://``)."""
        return self.source.startswith(HBASE) or self.target.startswith(HBASE)

    @property
    def wants_recovery_point(self) -> bool:
        return str(self.as_of or "").strip().lower() == RECOVERY_POINT

    def keys(self) -> list[str]:
        """The key columns compared (``row`` for HBase tables)."""
        return ["row"] if self.is_hbase else list(self.key)

    def options(self) -> CompareOptions:
        """How values are compared (HBase tables: cell bytes, always exact)."""
        if self.is_hbase:
            return CompareOptions()
        return CompareOptions(abs_tol=self.abs_tol, rel_tol=self.rel_tol, ignore_spaces=self.ignore_spaces,
                              ignore_case=self.ignore_case)

    def start(self) -> float | None:
        return parse_time(self.start_time, "--start-time")

    def as_of_time(self, now: float | None = None) -> float | None:
        """``as_of`` in epoch seconds: a time not after ``now`` (a verification can only be about
        what has been written). ``recovery-point`` must have been resolved by the front door."""
        if self.wants_recovery_point:
            raise ConfigError("--as-of recovery-point is not resolved to a time",
                              hint="the front door asks the failover gate for it (drt verify --as-of recovery-point)")
        t = parse_time(self.as_of, "--as-of")
        if t is not None and t > (time.time() if now is None else now) + 1:
            raise ConfigError(f"--as-of {self.as_of} is after now",
                              hint="a verification can only be about what has been written: give a past time")
        return t

    def window(self) -> tuple[float | None, float | None, float | None]:
        """``(start, end, as_of)`` in epoch seconds. ``as_of`` ends the window of an HBase table or a
        ``ts_column`` dataset (cells / rows stamped before it); for an HDFS tree it stays ``as_of``
        (the tree is read through the replication snapshot taken at or before it)."""
        end, as_of = parse_time(self.end_time, "--end-time"), self.as_of_time()
        if as_of is not None and (self.is_hbase or self.ts_column):
            end, as_of = as_of, None
        return self.start(), end, as_of

    def hbase_scan_options(self) -> dict[str, Any]:
        """The options of :func:`dr_toolkit.verify.hbase.make_scan` (besides the times)."""
        return {"families": self.families, "row_prefixes": self.row_prefixes, "versions": self.versions,
                "raw": self.raw}

    def fingerprint(self) -> dict[str, Any]:
        """What the verification was asked to compare, as stored with its report (``request``): the
        gate counts a report for a verify policy only when this equals what the policy asks (a
        last-hour ad-hoc run named like the policy proves nothing about the whole dataset). Source
        and target are kept as digests of the URIs as given (a URI may carry credentials)."""
        start = self.start()
        if self.is_hbase:
            scan = make_scan(start=start, **self.hbase_scan_options()).to_json()
            return {"source": _digest(self.source), "target": _digest(self.target), "key": self.keys(),
                    "format": "hbase", "peer_format": "hbase", "table": None, "peer_table": None,
                    "ignore_columns": [], "ts_column": None, "full_range": start is None,
                    "options": {"hbase": {k: v for k, v in scan.items() if k != "end_ms"}}}
        return {"source": _digest(self.source), "target": _digest(self.target), "key": self.keys(),
                "format": self.format, "peer_format": self.peer_format or self.format, "table": self.table,
                "peer_table": self.peer_table or self.table, "ignore_columns": sorted(self.ignore_columns),
                "ts_column": self.ts_column, "full_range": start is None, "options": self.options().to_json()}

    # -- changed copies and the serialised form ---------------------------------------------------
    def at(self, as_of: float) -> VerifyRequest:
        """The same request as of the time ``as_of`` (epoch seconds): a resolved ``recovery-point``."""
        return self.model_copy(update={"as_of": as_of})

    def to_json(self) -> dict[str, Any]:
        """The fields that differ from their defaults (what :meth:`parse` reads back)."""
        return self.model_dump(mode="json", exclude_defaults=True)

    @classmethod
    def parse(cls, data: str | dict[str, Any], where: str = "the request") -> VerifyRequest:
        """A request from its JSON text, or from its fields (a dict): a ConfigError (exit 2) in one
        line naming the field for anything wrong."""
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError as exc:
                raise ConfigError(f"not valid JSON: {exc}", where=where,
                                  hint='give an object: {"source": …, "target": …, "key": […]}') from None
        if not isinstance(data, dict):
            raise ConfigError("a request is a JSON object", where=where,
                              hint='{"source": …, "target": …, "key": […]}')
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            err = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")[0]
            field = ".".join(str(x) for x in err["loc"]) or "(top level)"
            what = (f"unknown field {field}" if err["type"] == "extra_forbidden" else
                    f"missing field {field}" if err["type"] == "missing" else f"field {field}: {err['msg']}")
            raise ConfigError(what, where=where, hint="the fields of dr_toolkit.verify.request.VerifyRequest"
                              ) from None


def policy_request(policy: VerifyPolicy, **run: Any) -> VerifyRequest:
    """What the verify policy ``policy`` asks: its dataset, key, format, columns and compare options
    (an HBase policy: every family, the newest version), plus ``run`` — the fields of this run
    (``end_time``, ``as_of``, ``report_path``, ``report_id``, ``who``, ``spark_master``)."""
    ask: dict[str, Any] = {"source": policy.source, "target": policy.target, "name": policy.name,
                           "recompare_sleep_s": policy.recompare_sleep_s}
    if not (policy.source.startswith(HBASE) or policy.target.startswith(HBASE)):
        ask.update(key=list(policy.key), format=policy.format, ts_column=policy.ts_column,
                   ignore_columns=list(policy.ignore_columns), abs_tol=policy.abs_tol, rel_tol=policy.rel_tol,
                   ignore_spaces=policy.ignore_spaces, ignore_case=policy.ignore_case)
    return VerifyRequest(**ask, **run)
