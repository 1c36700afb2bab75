"""The runbook's state is a value folded from its audit events; its steps are a table."""

from __future__ import annotations

import dataclasses

import pytest

from dr_toolkit.failover.runbook import STEP_FUNCTIONS, STEPS, UNPLANNED_STEPS, RunState, Step


def ev(action: str, status: str, after: object = None, *, dry_run: bool = False, message: str | None = None
       ) -> dict[str, object]:
    return {"action": action, "status": status, "dry_run": int(dry_run), "after_state": after, "message": message}


FENCED = {"fencing": {"epoch": 7, "at": 1700000000.5, "fenced_cluster": "hot", "by": "alice run r"}}


def test_an_executed_run_folds_its_epoch_steps_and_decision() -> None:
    events = [ev("run", "started", {"reason": "x", "execute": True, "unplanned": True}),
              ev("fence_hot", "started"), ev("fence_hot", "done", FENCED),
              ev("metadata_lint", "done", {"findings": [{"id": "a:1"}]}, message="1 hot-cluster value(s)"),
              ev("approval", "failed", {"error": "no"}), ev("approval", "done", {"approved": True, "accept_loss": True})]
    st = RunState.fold(events, execute=True)
    assert (st.epoch, st.fenced_at, st.unplanned) == (7, 1700000000.5, True)
    assert st.done == {"fence_hot", "metadata_lint", "approval"}
    assert st.decided and not st.rejected and st.approval == {"approved": True, "accept_loss": True}
    assert st.lint_findings == [{"id": "a:1"}] and st.messages["metadata_lint"] == "1 hot-cluster value(s)"
    assert st.statuses == {"fence_hot": "done", "metadata_lint": "done", "approval": "done"}


def test_a_dry_run_takes_no_epoch_and_a_rejection_is_a_decision() -> None:
    dry = RunState.fold([ev("fence_hot", "done", {"would": "bump"}, dry_run=True)], execute=False)
    assert dry.epoch is None and dry.fenced_at is None and dry.done == {"fence_hot"}
    st = RunState.fold([ev("approval", "rejected", {"approved": False})], execute=True)
    assert st.rejected and st.decided and st.approval is None and "approval" not in st.done


def test_the_newest_done_event_wins_and_the_state_is_a_value() -> None:
    st = RunState.fold([ev("final_gate", "done", {"verdict": "NO_GO"})], execute=True)
    newer = st.with_event(ev("final_gate", "done", {"verdict": "GO"}))
    assert newer.after["final_gate"] == {"verdict": "GO"}
    assert st.after["final_gate"] == {"verdict": "NO_GO"}  # the old value is unchanged
    with pytest.raises(dataclasses.FrozenInstanceError):
        st.epoch = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        st.after["final_gate"] = {}  # type: ignore[index]


def test_every_step_has_its_function_in_the_table() -> None:
    assert set(STEP_FUNCTIONS) == set(Step)
    assert set(STEPS) <= set(Step) and set(UNPLANNED_STEPS) <= set(Step)
