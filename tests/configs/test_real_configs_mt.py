"""WMT and IWSLT14 MT: every real config takes two updates (real_configs.py)."""

import pytest

from tests.configs.real_configs import check_two_updates, config_params


@pytest.mark.parametrize("name", config_params("mt"))
def test_real_config_takes_two_updates(name, tmp_path):
    check_two_updates(name, tmp_path)
