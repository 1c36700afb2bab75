"""The copy mode is decided in one place (`copy.plan.copy_mode`), with its reason: every branch,
and the target read (`chain_broken`) only when nothing else already decided."""

from __future__ import annotations

import pytest

from dr_toolkit.copy.plan import copy_mode
from dr_toolkit.topology import CopyOptions


def decide(options: CopyOptions, *, manifest_id: int | None = 7, has_base: bool = True, target_files: int = 0,
           broken: str | None = None) -> tuple[str, str, int]:
    asked = []

    def chain_broken() -> str | None:
        asked.append(1)
        return broken

    mode, reason = copy_mode(options, manifest_id=manifest_id, has_base=has_base, why_no_base="no manifest yet",
                             target_files=target_files, how="snapshot diff s1 → s2 (3 entries)",
                             chain_broken=chain_broken)
    return mode, reason, len(asked)


def test_a_target_holding_the_base_is_fast_forwarded_after_one_check_of_the_chain() -> None:
    assert decide(CopyOptions()) == ("fast-forward", "target holds manifest 7; snapshot diff s1 → s2 (3 entries)", 1)


@pytest.mark.parametrize(("kw", "want"), [
    ({"options": CopyOptions(overwrite=True)}, ("reconcile", "--overwrite rewrites every file", 0)),
    ({"options": CopyOptions(), "manifest_id": None, "has_base": False}, ("bootstrap", "no manifest yet", 0)),
    ({"options": CopyOptions(), "has_base": False, "target_files": 3},
     ("reconcile", "no manifest yet; the target already holds 3 files: compared by content", 0)),
    ({"options": CopyOptions(update=False)}, ("reconcile", "without --update only missing files are copied", 0)),
    ({"options": CopyOptions(), "broken": "a.txt: the target changed since manifest 7"},
     ("reconcile", "a.txt: the target changed since manifest 7", 1)),
])
def test_every_other_case_compares_the_whole_tree_and_says_why(kw: dict, want: tuple[str, str, int]) -> None:
    assert decide(**kw) == want
