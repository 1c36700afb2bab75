"""MirrorMaker-2-style topic and group selection in Kafka policies: the semantics of MM2's
DefaultTopicFilter / DefaultGroupFilter (each pattern matched against the whole name, a list is
an alternation, exclude wins, MM2's default excludes) and `drt config validate` on a bad pattern."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dr_toolkit.access import Access
from dr_toolkit.errors import ConfigError
from dr_toolkit.kafka.mirror import Mirror
from dr_toolkit.topology import parse_topology

REPO = Path(__file__).resolve().parents[2]
HEAD = ("version: 1\nclusters:\n  hot: {role: hot, kafka: {bootstrap_servers: 'h:9092'}}\n"
        "  cold: {role: cold, kafka: {bootstrap_servers: 'c:9092'}}\npolicies:\n  kafka:\n")


def _topo(*policies: str):  # type: ignore[no-untyped-def]
    return parse_topology(HEAD + "".join(f"    - {p}\n" for p in policies), "drt.yaml")


def test_patterns_match_whole_names_and_exclude_wins() -> None:
    topo = _topo("{name: pay, topics_regex: ['orders', 'pay\\..*'], groups: [audit], "
                 "groups_regex: ['billing-.*', 'fraud'], groups_exclude: ['billing-test.*']}")
    p = topo.policies.kafka[0]
    # full match, as Java's Matcher.matches(): 'orders' is not a prefix or a substring pattern
    assert [t for t in ("orders", "orders-v2", "old-orders", "pay.eu", "payXeu") if p.selects_topic(t)] == \
        ["orders", "pay.eu"]
    assert [g for g in ("billing-eu", "billing-test-1", "fraud", "fraud-2", "audit") if p.selects_group(g)] == \
        ["billing-eu", "fraud", "audit"]
    # MM2's default topics.exclude applies when none is given: internal, replica, __ topics
    assert not any(p.selects_topic(t) for t in ("pay.checkpoints.internal", "pay.x.replica"))
    live = ["fraud", "billing-test-9", "billing-us", "connect-billing", "zzz"]
    assert Mirror.of(topo, Access.none()).policy_groups(live) == ["audit", "billing-us", "fraud"]
    assert Mirror.of(topo, Access.none()).policy_topics(available=["pay.eu", "orders", "pay.internal"]) == ["pay.eu", "orders"]


def test_mm2_default_group_excludes_and_an_empty_exclude() -> None:
    topo = _topo("{name: a, topics: [t], groups_regex: ['.*']}", "{name: b, topics: [u], groups_regex: ['.*'], "
                 "groups_exclude: []}")
    a, b = topo.policies.kafka
    for g in ("console-consumer-42", "connect-mm2", "__internal"):
        assert not a.selects_group(g) and b.selects_group(g)


def test_a_pattern_selecting_nothing_is_said() -> None:
    topo = _topo("{name: pay, topics: [t], groups_regex: ['billing-.*', 'nobody-.*'], "
                 "groups_exclude: ['billing-test']}")
    notes = Mirror.of(topo, Access.none()).unmatched_patterns(groups=["billing-test", "other"])
    assert notes == ["policy 'pay': every group groups_regex 'billing-.*' matches on the hot cluster is "
                     "excluded by groups_exclude",
                     "policy 'pay': groups_regex 'nobody-.*' matches no consumer group on the hot cluster"]


@pytest.mark.parametrize(("policy", "words"), [
    ("{name: pay, topics: [t], groups_regex: ['billing-(.*']}", ["'pay'", "groups_regex", "'billing-(.*'"]),
    ("{name: pay, topics_regex: ['[a-']}", ["'pay'", "topics_regex", "'[a-'"]),
    ("{name: pay, topics: [t], groups: [connect-x]}", ["'pay'", "'connect-x'", "groups_exclude", "'connect-.*'"]),
    ("{name: pay, groups: [g]}", ["'pay'", "topics_regex"]),
])
def test_bad_selection_is_one_line_naming_policy_and_pattern(tmp_path: Path, policy: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as exc:
        _topo(policy)
    assert all(w in exc.value.what for w in words), exc.value.what
    cfg = tmp_path / "drt.yaml"
    cfg.write_text(HEAD + f"    - {policy}\n")
    r = subprocess.run([sys.executable, "-m", "dr_toolkit.cli.main", "--config", str(cfg), "config", "validate"],
                       capture_output=True, text=True, cwd=REPO, timeout=60)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and r.stdout == "", r.stderr
    assert f"{cfg}:7" in lines[0] and all(w in lines[0] for w in words) and "Traceback" not in r.stderr
