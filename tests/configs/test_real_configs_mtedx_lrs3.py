"""mTEDx ASR and ST, LRS3 lip reading: real configs take two updates (real_configs.py)."""

import pytest

from tests.configs.real_configs import check_two_updates, config_params


@pytest.mark.parametrize("name", config_params("mtedx_lrs3"))
def test_real_config_takes_two_updates(name, tmp_path):
    check_two_updates(name, tmp_path)
