"""Decoding rules ESPnet2 lacks: fairseq/espresso's beam-search stopping and scoring, checkpoint averaging."""
