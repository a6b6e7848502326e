"""LegoNN (Dalmia et al., "LegoNN: Building Modular Encoder-Decoder Models"): modules that talk through
CTC-grounded distributions over a designer-chosen vocabulary.

- ``interface``: the CTC interface of an encoder module (eqs. 6-7), the multi-module loss (eq. 11), the CTC
  length constraint and greedy CTC decoding of an encoder module alone.
- ``olc``: the Output Length Controller (eqs. 15-19).
- ``ingestors``: WEmb (eqs. 20-21) and BeamConv (eqs. 22-26) ingestors of incoming distributions.
- ``encoder`` / ``decoder`` / ``model``: LegoNN encoder modules, the LegoNN decoder and the ESPnet2 MT model.
- ``inventory``: saving modules as artefacts and composing them into an ESPnet-loadable model.
"""
