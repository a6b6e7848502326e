"""Per-step decoding pictures (Figs. 3/4): what each step looked at, written as a PNG."""

import numpy as np
import torch
from PIL import Image

from espnet_ext.analysis.attention_patches import plot_steps, step_views
from espnet_ext.nets.sharp.model import SharpAttentionRecognizer, SoftAttentionRecognizer

TOKENS = ["<blank>", "<unk>"] + list("0123456789") + ["<sos/eos>"]
TINY = dict(
    channels=(4, 8, 8, 16),
    lstm_units=8,
    attention_dim=8,
    decoder_units=8,
    embed_dim=4,
    max_length=4,
)


def test_soft_steps_show_the_receptive_field_of_the_most_attended_column():
    image = np.tile(np.arange(100, dtype=np.float32), (32, 1))
    alpha = torch.zeros(24)
    alpha[10] = 1.0  # column 10: centre 4 + 4 * 10 = 44 px, 46 px wide
    (view,) = step_views(image, [(3, alpha, None)])
    assert view.shape == (32, 46) and view[0, 0] == 21 and view[0, -1] == 66


def test_sharp_and_soft_decodings_are_drawn_to_png(tmp_path):
    torch.manual_seed(0)
    for cls in (SharpAttentionRecognizer, SoftAttentionRecognizer):
        model = cls(len(TOKENS), TOKENS, **TINY).eval()
        hypotheses, details, images = model.recognize(
            torch.rand(1, 100, 32), torch.tensor([100]), return_steps=True
        )
        steps = details[0]
        assert (
            len(steps) == len(hypotheses[0]) + 1
        )  # the tokens, then end-of-sequence or the step cap
        if cls is SharpAttentionRecognizer:
            assert all(patch.shape == (32, 24) for _, _, patch in steps)
        symbols = [TOKENS[token] for token, _, _ in steps]
        path = plot_steps(
            images[0, 0].numpy(), steps, symbols, tmp_path / f"{cls.attention}.png", title="x"
        )
        with Image.open(path) as png:
            assert png.format == "PNG" and png.size[0] >= 400
