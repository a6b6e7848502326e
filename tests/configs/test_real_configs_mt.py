"""WMT and IWSLT14 MT: every real config takes two updates (real_configs.py)."""

import pytest

from tests.configs.real_configs import check_two_updates, configs_of

# One worker trains the full-size models one after another (real_configs.py: two of the largest at once do
# not fit a 24 GB machine).
pytestmark = pytest.mark.xdist_group("real_configs_full_size")


@pytest.mark.parametrize("name", configs_of("mt"))
def test_real_config_takes_two_updates(name, tmp_path):
    check_two_updates(name, tmp_path)
