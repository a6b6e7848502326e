"""Corpus readers/writers and the embedded mini-corpus generators."""
