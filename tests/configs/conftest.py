"""The real-config checks of a module share one heap (tests/configs/real_configs.py): at the module's end it
goes back to the system."""

import sys

import pytest


@pytest.fixture(scope="module", autouse=True)
def _heap_returned():
    yield
    # imported by the modules that run checks
    real_configs = sys.modules.get("tests.configs.real_configs")
    if real_configs is not None:
        real_configs.return_heap()
