import pytest

from tests.attention.module_cases import use_local_path


@pytest.fixture
def local_paths(request, monkeypatch):
    """For tests parametrized by a ``module_cases.CASES`` name: its Local heads' path."""
    use_local_path(request.node.callspec.params["name"], monkeypatch)
