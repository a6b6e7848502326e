"""espnet_ext: ESPnet2 extensions and recipes for attention papers."""

from pathlib import Path

from setuptools import find_packages, setup

setup(
    name="espnet_ext",
    version="0.1.0",
    description="ESPnet2-based recipes and models for relaxed, multi-head-multi-attention, sharp, "
    "head-selection and LegoNN attention papers",
    long_description=Path("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["espnet_ext", "espnet_ext.*"]),
    python_requires=">=3.10",
    # Ranges the code is written for; tools/requirements.txt pins the exact set verified together.
    install_requires=[
        "espnet==202511",
        "torch>=2.6,<2.13",
        "torchaudio>=2.6,<2.13",
        "kaldiio>=2.18",
        "sentencepiece>=0.2",
        "espnet-g2p-en>=2.1",  # provides the g2p_en module; ESPnet's maintained fork
        "nltk>=3.8",
        "sacrebleu>=2.4",
        "jiwer>=3.0",
        "num2words>=0.5.13",
        "soundfile>=0.12",
        "scipy>=1.10",
        "PyYAML>=6",
        "matplotlib>=3.7",
        "Pillow>=10",
        "lmdb>=1.4",
        "opencv-python-headless>=4.8",
    ],
    extras_require={"test": ["pytest>=8"]},
)
