"""Attention mechanisms the papers add, as drop-in replacements of ESPnet's attention modules."""
