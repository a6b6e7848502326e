"""Entry points: ``python -m espnet_ext.bin.<task>_<train|inference>``.

Each one imports ``espnet_ext`` (registering our classes) and then runs ESPnet2's own entry point,
so training, checkpointing, ``--resume``, n-best averaging, DDP and beam search are ESPnet2's.
"""
