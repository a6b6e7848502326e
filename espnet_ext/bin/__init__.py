"""Entry points: ``python -m espnet_ext.bin.<task>_<train|inference>``.

Each one calls ``espnet_ext.registry.install()`` (our classes into ESPnet2's tasks) before it
imports ESPnet, and then runs ESPnet2's own entry point,
so training, checkpointing, ``--resume``, n-best averaging, DDP and beam search are ESPnet2's.
"""
