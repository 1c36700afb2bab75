"""The gate's rules on signals: GO only when everything is caught up (past the fence), one recovery point."""

from __future__ import annotations

from dr_toolkit.failover.gate import GO, NO_GO, decide
from dr_toolkit.failover.signals import Signal, unreadable
from dr_toolkit.topology import parse_topology

TOPO = parse_topology("""
clusters:
  a: {role: hot, local_root: /tmp/a}
  b: {role: cold, local_root: /tmp/b}
failover: {max_lag_s: 60}
""")
NOW = 1_000_000.0


def sig(component: str, name: str, *, caught_up: bool = True, lag: float = 0.0, wm: float | None = NOW,
        reason: str | None = None) -> Signal:
    return Signal(component, name, caught_up, lag, wm, {}, reason)


def test_all_caught_up_within_the_lag_bound_is_go_with_the_minimum_watermark_as_recovery_point() -> None:
    res = decide(TOPO, [sig("hdfs", "p:t", lag=10, wm=NOW - 10), sig("kafka", "orders", wm=NOW - 3),
                        sig("verify", "v", lag=5000, wm=NOW - 5000)], fenced_at=None, now=NOW)
    assert res.verdict == GO and res.reasons == []
    assert res.recovery_point == NOW - 5000
    doc = res.to_json()
    assert doc["verdict"] == "GO" and doc["recovery_point"].startswith("1970-01-12T")
    assert {s["name"] for s in doc["signals"]} == {"p:t", "orders", "v"}


def test_one_signal_behind_is_no_go_naming_it() -> None:
    res = decide(TOPO, [sig("hdfs", "p:t"), sig("kafka", "orders", caught_up=False, lag=40, wm=NOW - 40,
                                                reason="7 records not yet mirrored")], fenced_at=None, now=NOW)
    assert res.verdict == NO_GO
    assert res.reasons == ["kafka orders: 7 records not yet mirrored"]


def test_lag_beyond_the_bound_is_no_go_before_fencing() -> None:
    res = decide(TOPO, [sig("hdfs", "p:t", lag=61, wm=NOW - 61)], fenced_at=None, now=NOW)
    assert res.verdict == NO_GO and "exceeds failover.max_lag_s 60s" in res.reasons[0]


def test_after_fencing_every_watermark_must_be_past_the_fence() -> None:
    fenced = NOW - 100
    ok = decide(TOPO, [sig("hdfs", "p:t", wm=NOW), sig("verify", "v", lag=50, wm=NOW - 50)], fenced_at=fenced, now=NOW)
    assert ok.verdict == GO
    stale = decide(TOPO, [sig("hdfs", "p:t", wm=NOW), sig("verify", "v", lag=500, wm=NOW - 500)], fenced_at=fenced,
                   now=NOW)
    assert stale.verdict == NO_GO and "before the fence" in stale.reasons[0]


def test_an_unreadable_signal_or_fence_is_never_go() -> None:
    res = decide(TOPO, [sig("hdfs", "p:t"), unreadable("hbase", "1", "zookeeper 127.0.0.1:1: cannot connect")],
                 fenced_at=None, now=NOW)
    assert res.verdict == NO_GO and res.recovery_point is None
    assert res.reasons == ["hbase 1: zookeeper 127.0.0.1:1: cannot connect"]
    assert decide(TOPO, [sig("hdfs", "p:t")], fenced_at=None, fence_error="fencing state unreadable: x",
                  now=NOW).verdict == NO_GO
    assert decide(TOPO, [], fenced_at=None, now=NOW).verdict == NO_GO
