"""Reference digit images rendered from Roboto Bold (fonts-roboto) with Pillow."""

import numpy as np
import pytest

from espnet_ext.data.reference_digits import find_font, main, reference_digits
from espnet_ext.errors import ConfigError


def test_ten_distinct_centred_patches(tmp_path):
    refs = reference_digits()
    assert refs.shape == (10, 32, 24) and refs.dtype == np.float32
    assert refs.min() == 0.0 and refs.max() == 1.0
    flat = refs.reshape(10, -1)
    distances = np.linalg.norm(flat[:, None] - flat[None], axis=-1)
    assert (distances + np.eye(10) * 1e9).min() > 1.0  # every digit differs from every other
    for ref in refs:  # ink centred within a pixel
        ys, xs = np.nonzero(ref > 0.5)
        assert (
            abs((ys.min() + ys.max()) / 2 - 15.5) <= 1.0
            and abs((xs.min() + xs.max()) / 2 - 11.5) <= 1.0
        )
    assert np.array_equal(refs, reference_digits())  # deterministic
    out = tmp_path / "ref.npy"
    assert main(["--out", str(out)]) == 0 and np.array_equal(np.load(out), refs)


def test_missing_font_names_the_package(monkeypatch):
    monkeypatch.setattr("espnet_ext.data.reference_digits.FONT_DIRS", ("/nonexistent",))
    assert find_font.__defaults__ == ("Roboto-Bold.ttf",)
    with pytest.raises(ConfigError, match="fonts-roboto"):
        find_font()
