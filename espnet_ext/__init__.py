"""ESPnet2 extensions for the attention papers' recipes."""

__version__ = "0.1.0"
