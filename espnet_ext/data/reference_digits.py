"""Reference images of the ten digits for the sharp-attention paper's reference supervision (§4.1).

Each digit is rendered in Roboto Bold at size 36 (Debian ``fonts-roboto``; the paper used Pygame, we render
with Pillow), white on black like MNIST, its ink centred in a 24 x 32 (width x height) patch, grey values in
[0, 1]. The sharpener's patch is pulled towards the reference of the target digit with an L2 loss.

    python -m espnet_ext.data.reference_digits --out data/reference_digits.npy
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from espnet_ext.errors import ConfigError, reports_input_errors

PATCH = (24, 32)  # (width, height)
FONT_SIZE = 36
FONT_DIRS = ("/usr/share/fonts/truetype/roboto", "/usr/share/fonts/truetype", "/usr/share/fonts")


def find_font(name: str = "Roboto-Bold.ttf") -> Path:
    for root in FONT_DIRS:
        found = sorted(Path(root).rglob(name)) if Path(root).is_dir() else []
        if found:
            return found[0]
    raise ConfigError(
        f"font {name} not found under {', '.join(FONT_DIRS)}: install the Debian package "
        "fonts-roboto (tools/install.sh does)"
    )


def render_digit(digit: int, font_path=None, size: int = FONT_SIZE, patch=PATCH) -> np.ndarray:
    """One digit as float32 (height, width) in [0, 1], ink bounding box centred in the patch."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(str(font_path or find_font()), size)
    canvas = Image.new("L", (2 * size, 2 * size), 0)
    ImageDraw.Draw(canvas).text((size // 2, size // 4), str(digit), fill=255, font=font)
    ink = canvas.crop(canvas.getbbox())
    width, height = patch
    if ink.width > width or ink.height > height:  # keep the aspect ratio, fit the patch
        scale = min(width / ink.width, height / ink.height)
        ink = ink.resize(
            (max(1, round(ink.width * scale)), max(1, round(ink.height * scale))), Image.LANCZOS
        )
    out = Image.new("L", patch, 0)
    out.paste(ink, ((width - ink.width) // 2, (height - ink.height) // 2))
    return np.asarray(out, dtype=np.float32) / 255.0


def reference_digits(font_path=None) -> np.ndarray:
    """(10, 32, 24) float32: the reference image of digit d at index d."""
    return np.stack([render_digit(d, font_path) for d in range(10)])


@reports_input_errors
def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help=".npy file of shape (10, 32, 24)")
    args = parser.parse_args(argv)
    from espnet_ext.fileio import atomic_write

    images = reference_digits()
    with atomic_write(args.out, mode="wb") as f:
        np.save(f, images)


if __name__ == "__main__":
    sys.exit(main())
