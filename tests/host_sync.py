"""Operations that make a CUDA device wait for the host (or the host for the device), found on any device.

``torch.cuda.set_sync_debug_mode("error")`` catches host synchronisations only on a GPU. The operations that
cause them are known by name: a scalar read (``.item()``, ``int(t)``, ``bool(t)``, ``.tolist()``), shapes that
depend on values (``nonzero``, ``unique``, boolean-mask indexing, ``masked_select``, ``repeat_interleave``
without an output size) and tensors made from Python data (``torch.tensor(...)``: a blocking copy to the
device). ``HostSyncs`` records them while a module runs on the CPU, so the suite pins sync-free forwards and
backwards without a GPU.
"""

from __future__ import annotations

import traceback

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

SYNCING_OPS = {
    "aten._local_scalar_dense",
    "aten.is_nonzero",
    "aten.nonzero",
    "aten.masked_select",
    "aten.unique_dim",
    "aten._unique",
    "aten._unique2",
    "aten.unique_consecutive",
    "aten.lift_fresh",
    "aten.lift_fresh_copy",
    "aten.equal",
    "aten.allclose",
    "aten.bincount",
}
SYNCING_METHODS = {"tolist", "item", "__bool__", "__int__", "__float__", "__index__", "numpy"}


def _where() -> str:
    frames = [f for f in traceback.extract_stack() if "espnet_ext" in f.filename]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "(outside espnet_ext)"


class _Ops(TorchDispatchMode):
    def __init__(self, found: list[str]):
        super().__init__()
        self.found = found

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        syncing = name in SYNCING_OPS
        if name == "aten.repeat_interleave":
            syncing = (kwargs or {}).get("output_size") is None and isinstance(
                args[0], torch.Tensor
            )
        if name in ("aten.index", "aten.index_put", "aten.index_put_"):
            syncing = any(
                isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)
                for i in args[1]
            )
        if syncing:
            self.found.append(f"{name} at {_where()}")
        return func(*args, **(kwargs or {}))


class _Methods(TorchFunctionMode):
    def __init__(self, found: list[str]):
        super().__init__()
        self.found = found

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in SYNCING_METHODS:
            self.found.append(f"Tensor.{name} at {_where()}")
        return func(*args, **(kwargs or {}))


class HostSyncs:
    """``with HostSyncs() as syncs: ...`` -> ``syncs.found``: one line per syncing operation, with the
    line of ``espnet_ext`` that made it."""

    def __enter__(self) -> HostSyncs:
        self.found: list[str] = []
        self._modes = [_Methods(self.found), _Ops(self.found)]
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)
