"""The RPO SLO lives in the topology (``failover.rpo_slo_s``): optional, positive, at the end of ``Failover``."""

from __future__ import annotations

import pytest

from dr_toolkit.errors import ConfigError
from dr_toolkit.topology import parse_topology
from tests.unit.test_topology import BASE


def test_rpo_slo_defaults_to_none() -> None:
    assert parse_topology(BASE, "t.yaml").failover.rpo_slo_s is None


def test_rpo_slo_is_read() -> None:
    assert parse_topology(BASE + "failover: {rpo_slo_s: 900}\n", "t.yaml").failover.rpo_slo_s == 900


@pytest.mark.parametrize("bad", ["0", "-5", "soon"])
def test_rpo_slo_must_be_positive_seconds(bad: str) -> None:
    with pytest.raises(ConfigError, match="rpo_slo_s"):
        parse_topology(BASE + f"failover: {{rpo_slo_s: {bad}}}\n", "t.yaml")
