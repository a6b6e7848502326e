"""An encoder's or decoder's layers compiled with ``torch.compile``: ``encoder_conf`` (``decoder_conf``)
``{compile_layers: true}``.

Why: at the Multiformer recipe's batch (d 256, 28 x 700 frames) an H100 is idle most of an update,
waiting for PyTorch to dispatch the model's operators one by one; the Multiformer's layers dispatch more
of them than ESPnet's (its update took 1.23x its baseline's with the same GPU time). A compiled layer runs
its forward and its backward as one graph each, its element-wise operations fused.

Each layer is compiled in place (``torch.nn.Module.compile``): parameter names, checkpoints, averaging
and ``--init_param`` are unchanged. Layers of one structure share a graph (the parameters are graph
inputs), so an encoder compiles once per kind of layer, on its first batch, and again in eval mode;
``dynamic=True`` since utterance lengths change every batch. Inside a compiled layer the mask cache
(``espnet_ext.attention.mask_cache``) steps aside: the layer's graph computes its mask terms, fused. The
first batch pays the compilation (train_st.yaml's encoder, 4 x 700 frames, inductor on 2 CPU cores: 80 s
for its first forward and backward, 0.7 s eager). ``compile_backend`` names another backend of
``torch._dynamo.list_backends()`` (``aot_eager``: no code generation, to check that a model traces).
Several GPUs: DDP, as ``espnet_ext.jobs.launch`` runs ESPnet for ``--ngpu`` > 1
(``--multiprocessing_distributed true``). ``torch.nn.DataParallel``'s replicas would call the original
layers (the compiled call is bound to them): a forward pre-hook on the owning module refuses them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import torch

from espnet_ext.errors import ConfigError


def compile_layers_of(
    owner: torch.nn.Module,
    layers: Iterable[torch.nn.Module],
    backend: str,
    conf: str,
    dynamic: bool | None = True,
) -> None:
    """Compile every module of ``layers`` (held by ``owner``) in place with ``backend``; errors name
    ``<conf>.compile_backend`` / ``<conf>.compile_layers``. ``dynamic`` True: shapes symbolic from the
    first trace (utterance lengths); None: PyTorch's default, static until a shape changes (images of one
    size, where symbolic window arithmetic traced 20x slower). ``owner`` refuses to run as a
    ``torch.nn.DataParallel`` replica (a pre-hook: replicas share their original's hooks)."""
    backends = torch._dynamo.list_backends(exclude_tags=())
    if backend not in backends:
        raise ConfigError(
            f"'{backend}' is not a torch.compile backend: {sorted(backends)}",
            key=f"{conf}.compile_backend",
        )
    for layer in layers:
        layer.compile(backend=backend, dynamic=dynamic)
    owner.register_forward_pre_hook(functools.partial(_refuse_replica, f"{conf}.compile_layers"))


def _refuse_replica(key: str, module: torch.nn.Module, args) -> None:
    """A replica's compiled layers would run the original module's parameters."""
    if getattr(module, "_is_replica", False):
        raise ConfigError(
            "compile_layers runs on one GPU or under DDP (--multiprocessing_distributed true), not "
            "torch.nn.DataParallel",
            key=key,
        )
