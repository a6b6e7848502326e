"""The baseline models refuse configurations that cannot work, naming the config key."""

import pytest

from espnet_ext.errors import ConfigError
from espnet_ext.nets.baselines.crnn import CRNN
from espnet_ext.nets.baselines.visual_frontend import Conv3dResNetFrontend


def test_crnn_width_pooling_needs_one_entry_per_block():
    with pytest.raises(ConfigError, match=r"^key 'width_pooling': needs one entry per CNN block"):
        CRNN(vocab_size=5, channels=(4, 8), width_pooling=(True,))


def test_crnn_image_height_must_survive_the_poolings():
    # Three blocks halve the height three times: 4 -> 2 -> 1 -> 0.
    with pytest.raises(ConfigError, match=r"^key 'image_height': 4 is too small for 3 blocks"):
        CRNN(vocab_size=5, image_height=4, channels=(4, 4, 4))
    CRNN(vocab_size=5, image_height=8, channels=(4, 4, 4), lstm_units=4)


@pytest.mark.parametrize("stages", [0, 5])
def test_visual_frontend_resnet_stages(stages):
    with pytest.raises(ConfigError, match=rf"^key 'resnet_stages': must be 1..4, got {stages}"):
        Conv3dResNetFrontend(resnet_stages=stages)
