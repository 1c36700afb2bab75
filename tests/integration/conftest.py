"""The copy modules owned by another change, until they carry the mark themselves: their tests run
copies, so they get a copy state location of their own (tests/support/fixtures_copy.py,
``copy_state_dir``), as every other module that runs copies does through its ``pytestmark``."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import pytest

_COPY_MODULES = {"test_copy_random.py", "test_copy_listing.py"}


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> Generator[None, pytest.Module, pytest.Module]:
    module = yield
    if module_path.name in _COPY_MODULES and module is not None:
        module.add_marker(pytest.mark.usefixtures("copy_state_dir"))
    return module
