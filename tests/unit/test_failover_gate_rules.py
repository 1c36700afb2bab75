"""The gate's rules on Signal values: recovery point = min safe time; GO only when every signal is
caught up and states a safe time past the fence (after fencing) or within the lag bound (before)."""

from __future__ import annotations

import random

import pytest

from dr_toolkit.failover.gate import GO, NO_GO, decide, recovery_point
from dr_toolkit.signal import Signal, unreadable
from dr_toolkit.topology import parse_topology

TOPO = parse_topology("""
clusters:
  a: {role: hot, local_root: /tmp/a}
  b: {role: cold, local_root: /tmp/b}
failover: {max_lag_s: 60}
""")
SKEWED = parse_topology("""
clusters:
  a: {role: hot, local_root: /tmp/a}
  b: {role: cold, local_root: /tmp/b}
failover: {max_lag_s: 60, clock_skew_s: 2}
""")
NOW = 1_000_000.0


def sig(component: str, name: str, *, caught_up: bool = True, safe: float | None = NOW, basis: str = "test",
        reason: str | None = None) -> Signal:
    return Signal(component, name, caught_up, None if safe is None else NOW - safe, safe, basis, {}, reason)


def test_all_caught_up_within_the_lag_bound_is_go_with_the_minimum_safe_time_as_recovery_point() -> None:
    res = decide(TOPO, [sig("hdfs", "p:t", safe=NOW - 10), sig("kafka", "orders", safe=NOW - 3),
                        sig("verify", "v", safe=NOW - 5000)], fenced_at=None, now=NOW)
    assert res.verdict == GO and res.reasons == []
    assert res.recovery_point == NOW - 5000 and res.limiting == "verify v"
    doc = res.to_json()
    assert doc["verdict"] == "GO" and doc["recovery_point"].startswith("1970-01-12T")
    assert {s["name"] for s in doc["signals"]} == {"p:t", "orders", "v"}
    assert all({"component", "name", "caught_up", "lag_s", "safe_time", "basis", "detail"} <= set(s)
               for s in doc["signals"])


def test_one_signal_behind_is_no_go_and_the_recovery_point_is_before_its_unshipped_write() -> None:
    write_at = NOW - 40  # the first write cold does not hold
    res = decide(TOPO, [sig("hdfs", "p:t"), sig("kafka", "orders", caught_up=False, safe=write_at - 0.001,
                                                reason="7 records not yet mirrored")], fenced_at=None, now=NOW)
    assert res.verdict == NO_GO
    assert res.reasons == ["kafka orders: 7 records not yet mirrored"]
    assert res.recovery_point is not None and res.recovery_point < write_at


def test_a_caught_up_signal_without_a_safe_time_is_no_go_and_no_recovery_point() -> None:
    res = decide(TOPO, [sig("hdfs", "p:t"), sig("hbase", "1", safe=None, basis="queue size only")],
                 fenced_at=None, now=NOW)
    assert res.verdict == NO_GO and res.recovery_point is None
    assert res.reasons == ["hbase 1: no safe time can be stated (queue size only)"]


def test_lag_beyond_the_bound_is_no_go_before_fencing() -> None:
    res = decide(TOPO, [sig("hdfs", "p:t", safe=NOW - 61)], fenced_at=None, now=NOW)
    assert res.verdict == NO_GO and "exceeds failover.max_lag_s 60s" in res.reasons[0]


def test_after_fencing_every_safe_time_must_be_past_the_fence_plus_the_skew_bound() -> None:
    fenced = NOW - 100
    ok = decide(TOPO, [sig("hdfs", "p:t"), sig("verify", "v", safe=NOW - 50)], fenced_at=fenced, now=NOW)
    assert ok.verdict == GO
    stale = decide(TOPO, [sig("hdfs", "p:t"), sig("verify", "v", safe=NOW - 500)], fenced_at=fenced, now=NOW)
    assert stale.verdict == NO_GO and "before the fence" in stale.reasons[0]
    # a safe time 1 s after the fence is not enough when the hosts' clocks may differ by 2 s
    near = [sig("hbase", "1", safe=fenced + 1)]
    assert decide(TOPO, near, fenced_at=fenced, now=NOW).verdict == GO
    res = decide(SKEWED, near, fenced_at=fenced, now=NOW)
    assert res.verdict == NO_GO and "+ 2s clock skew" in res.reasons[0]


def test_an_unreadable_signal_or_fence_is_never_go() -> None:
    res = decide(TOPO, [sig("hdfs", "p:t"), unreadable("hbase", "1", "zookeeper 127.0.0.1:1: cannot connect")],
                 fenced_at=None, now=NOW)
    assert res.verdict == NO_GO and res.recovery_point is None
    assert res.reasons == ["hbase 1: zookeeper 127.0.0.1:1: cannot connect"]
    assert decide(TOPO, [sig("hdfs", "p:t")], fenced_at=None, fence_error="fencing state unreadable: x",
                  now=NOW).verdict == NO_GO
    assert decide(TOPO, [], fenced_at=None, now=NOW).verdict == NO_GO


def test_random_signal_sets_go_only_when_every_rule_holds() -> None:
    """The gate's invariant, attacked with random sets: GO implies every signal caught up with a safe
    time past the fence (or within the lag bound), and the recovery point is never after any safe time."""
    rnd = random.Random(11)
    for _ in range(2000):
        fenced = rnd.choice([None, NOW - rnd.uniform(0, 200)])
        sigs = []
        for i in range(rnd.randint(1, 6)):
            safe = rnd.choice([None, NOW - rnd.uniform(0, 120)])
            sigs.append(sig(rnd.choice(["hdfs", "kafka", "hbase", "verify"]), f"s{i}",
                            caught_up=rnd.random() < 0.85, safe=safe, reason="behind"))
        res = decide(TOPO, sigs, fenced_at=fenced, now=NOW)
        rp, _ = recovery_point(sigs)
        assert res.recovery_point == rp
        if rp is not None:
            assert all(s.safe_time is not None and rp <= s.safe_time for s in sigs)
        else:
            assert any(s.safe_time is None for s in sigs)
        if res.verdict == GO:
            assert rp is not None
            for s in sigs:
                assert s.caught_up and s.safe_time is not None
                if fenced is not None:
                    assert s.safe_time >= fenced
                elif s.component != "verify":
                    assert NOW - s.safe_time <= 60
            if fenced is not None:
                assert rp >= fenced


def test_an_hbase_policys_own_max_lag_bounds_its_peer() -> None:
    """Issue 20 #15: policies.hbase[].max_lag_s was never read."""
    topo = parse_topology("""
clusters:
  a: {role: hot, local_root: /tmp/a}
  b: {role: cold, local_root: /tmp/b}
policies:
  hbase: [{name: tight, peer_id: "1", max_lag_s: 30}, {name: loose, peer_id: "2"}]
failover: {max_lag_s: 60}
""")
    res = decide(topo, [sig("hbase", "1", safe=NOW - 45), sig("hbase", "2", safe=NOW - 45)], fenced_at=None, now=NOW)
    assert res.verdict == NO_GO and res.reasons == ["hbase 1: lag 45s exceeds policies.hbase[].max_lag_s 30s"]
    assert decide(topo, [sig("hbase", "1", safe=NOW - 20), sig("hbase", "2", safe=NOW - 59)], fenced_at=None,
                  now=NOW).verdict == GO


# one Kafka policy selecting only by pattern: no signal name before it is read
PATTERN_ONLY_KAFKA = """
clusters:
  a: {role: hot, local_root: /tmp/a, kafka: {bootstrap_servers: "127.0.0.1:1"}}
  b: {role: cold, local_root: /tmp/b, kafka: {bootstrap_servers: "127.0.0.1:2"}}
policies:
  kafka:
    - {name: all-orders, topics_regex: ["orders\\\\..*"], groups_regex: ["billing-.*"]}
failover: {max_lag_s: 60}
"""


def test_a_failed_reader_of_a_policy_selecting_only_by_pattern_still_gives_no_go(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A Kafka policy with only ``topics_regex``/``groups_regex`` has no signal name before it is
    read: when its reader fails, the gate must still hold a NO_GO signal for it (else GO on the rest)."""
    from dr_toolkit.failover import signals as fs

    topo = parse_topology(PATTERN_ONLY_KAFKA)

    def broken(*_a: object) -> list[Signal]:
        raise RuntimeError("the brokers did not answer")

    monkeypatch.setitem(fs.READERS, "kafka", broken)
    got = fs.read_signals(topo, None, None, components=("kafka",), now=NOW)  # type: ignore[arg-type]
    assert got and all(not s.caught_up and s.basis == "unreadable" for s in got)
    assert decide(topo, [sig("hdfs", "p:t", safe=NOW - 1), *got], fenced_at=None, now=NOW).verdict == NO_GO


def test_a_reader_without_a_valid_ticket_stops_the_check_naming_the_principal(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A missing or expired Kerberos ticket is not a state of the replication: the check stops with
    the KerberosError (one line naming the principal, exit 3) instead of recording a NO_GO that reads
    as lag; any other failure stays a NO_GO signal."""
    from dr_toolkit.errors import EXIT_UNREACHABLE
    from dr_toolkit.failover import signals as fs
    from dr_toolkit.kerberos import KerberosError

    topo = parse_topology(PATTERN_ONLY_KAFKA)

    def no_ticket(*_a: object) -> list[Signal]:
        raise KerberosError("no valid ticket for drt@DRT.TEST", where="kafka a", hint="check the keytab")

    monkeypatch.setitem(fs.READERS, "kafka", no_ticket)
    with pytest.raises(KerberosError) as err:
        fs.read_signals(topo, None, None, components=("kafka",), now=NOW)  # type: ignore[arg-type]
    assert err.value.exit_code == EXIT_UNREACHABLE and "drt@DRT.TEST" in str(err.value)
