"""The HBase verification's options and URIs (no servers): what they mean in VerifyReplication's
terms, and the one-line errors (exit 2) for bad input."""

from __future__ import annotations

import pytest

from dr_toolkit.errors import ConfigError
from dr_toolkit.verify.hbase import MAX_TS, cell_diff, make_scan, parse


def test_options_are_verifyreplications() -> None:
    s = make_scan(families="d, x", row_prefixes=["a", "b"], start=1.5, end=2, versions="3", raw=True, now=10)
    assert (s.families, s.row_prefixes, s.start_ms, s.end_ms, s.versions, s.raw) == (("d", "x"), ("a", "b"), 1500,
                                                                                     2000, 3, True)
    assert s.verifyrep_args() == ["--starttime=1500", "--endtime=2000", "--versions=3", "--families=d,x",
                                  "--row-prefixes=a,b", "--raw"]
    default = make_scan()
    assert (default.start_ms, default.end_ms, default.versions) == (0, MAX_TS, -1)  # newest version only
    assert default.verifyrep_args() == [] and default.to_json()["versions"] == 1
    assert make_scan(versions="all").to_json()["versions"] == "all"


@pytest.mark.parametrize("kw,msg", [
    ({"end": 100.0}, "is after now"),
    ({"start": 100.0}, "is after now"),
    ({"start": 5.0, "end": 5.0}, "not after --start-time"),
    ({"versions": "0"}, "at least 1"),
    ({"versions": "many"}, "not a number"),
    ({"families": "d,a b"}, "has a space"),
])
def test_bad_options_are_config_errors(kw, msg) -> None:
    with pytest.raises(ConfigError, match=msg):
        make_scan(now=50.0, **kw)


def test_uris() -> None:
    t = parse("hbase://127.0.0.1:2181,h2:2181/hbase-x/ns:t", None, "source")
    assert (t.quorum, t.parent, t.table) == ("127.0.0.1:2181,h2:2181", "/hbase-x", "ns:t")
    assert parse("hbase://127.0.0.1:2181/ns:t", None, "source").parent == "/hbase"
    for bad, msg in (("hbase://hot/ns:t", "no topology"), ("hbase:///ns:t", "no cluster"),
                     ("file:///x", "not an hbase://"), ("hbase://h:x/t", "bad ZooKeeper address"),
                     ("hbase://127.0.0.1:1/p/:t", "bad table name")):
        with pytest.raises(ConfigError, match=msg):
            parse(bad, None, "peer")


def test_samples_keep_only_the_differing_cells() -> None:
    def cell(q: str, v: str, ts: int = 1) -> dict[str, object]:
        return {"family": "d", "qualifier": q, "ts": ts, "type": "Put", "value": v}

    samples = {"CONTENT_DIFFERENT_ROWS": [{"key": {"row": "r"}, "columns": ["cells"],
                                          "source": {"cells": [cell("a", "1"), cell("b", "2")]},
                                          "peer": {"cells": [cell("a", "1"), cell("b", "3"), cell("b", "2", 0)]}}]}
    [item] = cell_diff(samples)["CONTENT_DIFFERENT_ROWS"]
    assert item["source"] == {"cells": [cell("b", "2")]}
    assert item["peer"] == {"cells": [cell("b", "3"), cell("b", "2", 0)]}
    assert item["cells"] == {"source": 2, "peer": 3}
