"""Acoustic feature extraction for Kaldi data dirs (see ``fbank``; run as ``python -m espnet_ext.features.fbank``)."""
