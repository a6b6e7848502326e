"""Per-task residual adapters (Bapna & Firat, 2019), the baseline of the head-selection paper (§4).

After every encoder and decoder layer, the utterance's task (a language direction or a domain) adds

    x + W_up ReLU(W_down LayerNorm(x)),   W_down: d -> ``adapter_dim`` (256 in the paper), W_up back to d.

W_up starts at zero, so a freshly added adapter is the identity and the model starts as the shared one.
The adapter model is initialised from a trained shared model (``load_shared_model`` here, or ESPnet's
``init_param``, which also loads partially) and trained with the shared parameters frozen
(``freeze_all_but_adapters``; the models of ``espnet_ext.nets.task_models`` do it with
``train_adapters_only: true``). An adapter model has one adapter per trained task: a task id it was not
trained on (a zero-shot direction) is refused, not silently served by another task's adapter.

In training each task present runs its own adapter on its rows (``TaskRows``); an encoder's or decoder's
adapters share one grouping of the batch's rows, read back to the host once a forward
(``rows_grouped_once``), not once a layer. The adapters run as forward hooks of ESPnet's layers, so the
shared model's state-dict keys are kept and the adapters live under ``encoder.adapters`` /
``decoder.adapters``. With the incremental decoding cache, a decoder layer returns the cached (already
adapted) positions followed by the new one; only the new one passes the adapter.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping

import torch
import torch.nn.functional as F
from espnet2.asr.decoder.transformer_decoder import TransformerDecoder
from espnet2.asr.encoder.transformer_encoder import TransformerEncoder
from torch import nn

from espnet_ext.attention.head_selection import TaskConditioned
from espnet_ext.errors import ConfigError
from espnet_ext.nets.cnn_transformer_encoder import CNNTransformerEncoder
from espnet_ext.nets.multiformer_encoder import S2TTransformerEncoder

ADAPTER_KEY = "adapters."


class BottleneckAdapter(nn.Module):
    """x + W_up ReLU(W_down LayerNorm(x)) on (..., d)."""

    def __init__(self, size: int, adapter_dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(size)
        self.down = nn.Linear(size, adapter_dim)
        self.up = nn.Linear(adapter_dim, size)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.up(torch.relu(self.down(self.norm(x))))


@dataclasses.dataclass
class TaskRows:
    """The rows of a batch grouped by task: the tasks present (ascending), each one's rows, and the order
    that puts the grouped rows back (None for a batch of one task). ``of`` reads one count per task back to
    the host: once for every adapter of an encoder or decoder (``rows_grouped_once``)."""

    tasks: list[int]
    rows: list[torch.Tensor]
    restore: torch.Tensor | None

    @classmethod
    def of(cls, task_id: torch.Tensor, num_tasks: int) -> TaskRows:
        """``task_id`` (B,) ids in [0, num_tasks) -> their grouping."""
        present = task_id[None, :] == torch.arange(num_tasks, device=task_id.device)[:, None]
        counts = present.sum(1).tolist()  # the one read back (bincount would also read the max)
        tasks = [t for t, n in enumerate(counts) if n]
        if len(tasks) == 1:
            return cls(tasks, [], None)
        grouped = torch.argsort(task_id, stable=True)
        rows = [r for r in torch.split(grouped, counts) if r.numel()]
        return cls(tasks, rows, torch.argsort(grouped))

    def apply(
        self, fn: Callable[[int, torch.Tensor], torch.Tensor], x: torch.Tensor
    ) -> torch.Tensor:
        """``fn(t, rows of x)`` per task t, reassembled in batch order."""
        if self.restore is None:
            return fn(self.tasks[0], x)
        parts = [fn(t, x.index_select(0, r)) for t, r in zip(self.tasks, self.rows)]
        return torch.cat(parts).index_select(0, self.restore)


class TaskAdapters(TaskConditioned):
    """One ``BottleneckAdapter`` per task; each utterance of (B, T, d) passes its task's adapter."""

    task_kind = "adapter model (one adapter per trained task; zero-shot directions have none)"

    def __init__(self, num_tasks: int, size: int, adapter_dim: int):
        super().__init__()
        if num_tasks < 1 or adapter_dim < 1:
            raise ConfigError(
                f"needs num_tasks >= 1 and adapter_dim >= 1, got {num_tasks}, {adapter_dim}",
                key="num_tasks" if num_tasks < 1 else "adapter_dim",
            )
        self.num_tasks = num_tasks
        self.per_task = nn.ModuleList(
            BottleneckAdapter(size, adapter_dim) for _ in range(num_tasks)
        )
        self.rows: TaskRows | None = None  # given by rows_grouped_once for one forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, d): each row through its task's adapter.

        With gradients (training) each task present runs its own adapter on its rows (``TaskRows``,
        which reads the tasks present back to the host): a task absent from the batch must get no
        gradient at all, so that the optimizer skips its adapter as fairseq's does (a zero gradient
        would still move it under Adam's momentum and weight decay). Without gradients (validation,
        decoding) every row's parameters are gathered and applied in batched products: no id is read
        back to the host and no loop runs over the tasks present."""
        if torch.is_grad_enabled():
            rows = self.rows
            if rows is None:
                rows = TaskRows.of(self.task_ids_for(x.size(0), x.device), self.num_tasks)
            return rows.apply(lambda t, part: self.per_task[t](part), x)
        one = self.task_id is not None and self.task_id.numel() == 1  # decoding: one adapter
        task_id = self.task_ids_for(1 if one else x.size(0), x.device)
        return self._adapt(x, *(p.index_select(0, task_id) for p in self._stacked()))

    def _stacked(self) -> list[torch.Tensor]:
        """Every task's parameters stacked: norm weight, norm bias (tasks, d), W_down (tasks, a, d),
        b_down (tasks, a), W_up (tasks, d, a), b_up (tasks, d)."""
        adapters = self.per_task
        return [
            torch.stack([getattr(getattr(a, module), name) for a in adapters])
            for module, name in (("norm", "weight"), ("norm", "bias"), ("down", "weight"),
                                 ("down", "bias"), ("up", "weight"), ("up", "bias"))
        ]  # fmt: skip

    def _adapt(self, x, norm_weight, norm_bias, down_weight, down_bias, up_weight, up_bias):
        """``BottleneckAdapter`` with each row's parameters (leading dimension B, or 1 for the batch)."""
        eps = self.per_task[0].norm.eps
        normed = F.layer_norm(x, x.shape[-1:], eps=eps) * norm_weight[:, None] + norm_bias[:, None]
        hidden = torch.relu(normed @ down_weight.transpose(1, 2) + down_bias[:, None])
        return x + hidden @ up_weight.transpose(1, 2) + up_bias[:, None]


# Eager in a compiled layer (compile_layers): the tasks present, Python ints, would make a graph per set.
@torch.compiler.disable
def _adapt_output(adapters: TaskAdapters, module, args, kwargs, output):
    x, *rest = output
    if kwargs.get("cache") is not None:  # cached positions were adapted at their own step
        x = torch.cat([x[:, :-1], adapters(x[:, -1:])], dim=1)
    else:
        x = adapters(x)
    return (x, *rest)


@contextlib.contextmanager
def rows_grouped_once(adapters: nn.ModuleList, batch: int, device: torch.device) -> Iterator[None]:
    """In training, the adapters of one encoder or decoder forward (``batch`` rows) share one ``TaskRows``."""
    if not (torch.is_grad_enabled() and len(adapters) and adapters[0].task_id is not None):
        yield
        return
    first = adapters[0]
    rows = TaskRows.of(first.task_ids_for(batch, device), first.num_tasks)
    for adapter in adapters:
        adapter.rows = rows
    try:
        yield
    finally:
        for adapter in adapters:
            adapter.rows = None


def attach_adapters(layers, num_tasks: int, size: int, adapter_dim: int) -> nn.ModuleList:
    """Per-task adapters after each of ``layers`` (ESPnet encoder/decoder layers) -> the adapters."""
    adapters = nn.ModuleList(TaskAdapters(num_tasks, size, adapter_dim) for _ in layers)
    for layer, adapter in zip(layers, adapters):
        layer.register_forward_hook(
            functools.partial(_adapt_output, adapter), with_kwargs=True, always_call=False
        )
    return adapters


class _AdapterEncoder:
    """Mixin before an ESPnet-style encoder class: per-task adapters after each of its layers."""

    def __init__(self, input_size: int, num_tasks: int = 1, adapter_dim: int = 256, **kwargs):
        super().__init__(input_size, **kwargs)
        self.adapters = attach_adapters(self.encoders, num_tasks, self.output_size(), adapter_dim)

    def forward(self, xs_pad, ilens, *args, **kwargs):
        with rows_grouped_once(self.adapters, xs_pad.size(0), xs_pad.device):
            return super().forward(xs_pad, ilens, *args, **kwargs)


class AdapterTransformerEncoder(_AdapterEncoder, TransformerEncoder):
    pass


class AdapterCNNTransformerEncoder(_AdapterEncoder, CNNTransformerEncoder):
    pass


class AdapterS2TTransformerEncoder(_AdapterEncoder, S2TTransformerEncoder):
    """The paper's S2T Transformer with adapters (the baseline of its speech experiments)."""


class AdapterTransformerDecoder(TransformerDecoder):
    def __init__(
        self,
        vocab_size: int,
        encoder_output_size: int,
        num_tasks: int = 1,
        adapter_dim: int = 256,
        **kwargs,
    ):
        super().__init__(vocab_size, encoder_output_size, **kwargs)
        # ESPnet's decoder works at the encoder's output size
        self.adapters = attach_adapters(self.decoders, num_tasks, encoder_output_size, adapter_dim)

    def forward(self, hs_pad, hlens, ys_in_pad, *args, **kwargs):
        with rows_grouped_once(self.adapters, ys_in_pad.size(0), ys_in_pad.device):
            return super().forward(hs_pad, hlens, ys_in_pad, *args, **kwargs)


def is_adapter_parameter(name: str) -> bool:
    return name.startswith(ADAPTER_KEY) or f".{ADAPTER_KEY}" in name


def freeze_all_but_adapters(model: nn.Module) -> int:
    """Stop gradients to every parameter but the adapters'; returns the number of trainable ones."""
    trainable = 0
    for name, param in model.named_parameters():
        param.requires_grad_(is_adapter_parameter(name))
        trainable += param.numel() if param.requires_grad else 0
    if trainable == 0:
        raise ConfigError("the model has no adapters to train", key="train_adapters_only")
    return trainable


def load_shared_model(model: nn.Module, shared_state: Mapping[str, torch.Tensor]) -> None:
    """Load a trained shared model's state dict into an adapter model: all but the adapters must match."""
    result = model.load_state_dict(shared_state, strict=False)
    missing = [k for k in result.missing_keys if not is_adapter_parameter(k)]
    if missing or result.unexpected_keys:
        key = (missing or result.unexpected_keys)[0]
        raise ConfigError(
            f"the shared model does not match the adapter model ({len(missing)} missing, "
            f"{len(result.unexpected_keys)} unexpected parameters)",
            key=key,
        )
