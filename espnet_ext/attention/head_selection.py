"""Attention head selection per task (Gong et al., "Pay better attention to attention: head selection in
multilingual and multi-domain sequence modeling", §3, eqs. 3-7).

A self-attention layer owns H' candidate heads of width d/H; each task t (a language, a direction or a
domain) uses H of them, so the output keeps dimension d. Per task and head one logit φ_t^(h) (the
parameters of eq. 4 with φ_t^(h)(0) fixed at 0, so the layer adds exactly T x H' parameters):

    q_φ(z_t^(h)) = exp((φ(1) + ε(1))/τ) / Σ_j exp((φ(j) + ε(j))/τ) = σ((φ + ε(1) - ε(0))/τ),  ε ~ G(0, 1)  (4)

The training loss gains  w · KL(q_φ(z) || p(z)),  p(z=1) = H/H'  (eq. 3), the KL between Bernoulli
posteriors σ(φ) and the prior. The layer keeps each utterance's KL as the mean over its H' heads; the model
(``espnet_ext.nets.task_models``) averages it over the layers of each side and weights utterances by their
target tokens, the normalisation of the authors' ``HeadSelectionLoss`` (fairseq
examples/attention_head_selection/src/loss/attention_head_selection.py), so that w means what their
``--kl-weight`` means. Their term itself differs: y (log y - log p) of the Gumbel sample y that selected the
heads (the z = 1 half of the KL, noisy and tempered); ``kl_form="authors"`` computes it instead.

τ (``temperature``): the authors' ``AttnHeadSelector`` uses ``head_select_temp=5.0``
(src/modules/attn_head_selector.py); the paper does not state it. The default here stays 1.0 (the module's
long-standing value); the real configs set 5.0.

Selection s_t^(h) from the sampled posterior (noise-free at inference, so inference is deterministic):
  subset (5): the H heads of highest posterior;
  group (6): heads form H contiguous groups of r = H'/H; the best head of each group.
(The authors' selector draws Gumbel noise at inference too, at every decoder call, so their decoding of a
task varies from run to run; ours decodes with the noise-free posterior, its most probable selection, a
deliberate deviation. ``inference_noise=True`` draws as theirs does.)
Selected heads are concatenated in ascending head order (eq. 1), which for the group strategy puts group
g's head in output slot g (eq. 7). In training each selected head is scaled by the straight-through value
s + q - stop_grad(q) (= 1 forward, gradient into φ through q).

Only the selected heads are projected and attend: with one task id for the batch the q/k/v projections use
the H selected heads' rows of the H'-head weight matrices (self-attention: q, k and v rows side by side, one
product). A batch that mixes tasks (and ESPnet's model passes one id per utterance) is not split: every
task's selection is drawn at once (one Gumbel draw per task, shared by its utterances) and each utterance
projects with its task's rows, gathered per row (one batched product), so every utterance gets exactly
what it would alone with its task. (The authors project all H' candidates, fairseq
``examples/attention_head_selection/src/modules/multihead_functional.py``, and keep the selected ones; at
H' = 2H that doubles the products and was slower on an H100.) The encoders and decoders of
``espnet_ext.nets.head_selection_transformer`` draw all their layers' selections at once
(``draw_together``). No step reads a value back to the host (no ``nonzero``, ``unique`` or loop over the
tasks present): on a GPU the layer never waits for the device.

The task of each utterance is set on the module before the forward (``set_task_id``), because ESPnet's
layers call self-attention as ``self_attn(q, k, v, mask)``; a task id of shape (1,) serves every row (beam
search decodes one utterance with many hypotheses).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn

from espnet_ext.errors import ConfigError, InputError

STRATEGIES = ("subset", "group")
# Initial φ per task and head: "spread", φ ~ U(log 0.01, log 1) as the authors' released code initialises
# them (each task starts from its own head preference, which the Gumbel draw perturbs), or "zero" (every
# head equally likely: each training step draws a fresh, random selection for every task, and learning is
# slower).
LOGIT_INITS = {"zero": (0.0, 0.0), "spread": (math.log(0.01), 0.0)}


class TaskConditioned(nn.Module):
    """A module whose forward depends on the task id of each utterance, set by ``set_task_id``."""

    num_tasks: int
    task_id: torch.Tensor | None = None
    task_kind = "model"  # names the refusing module in errors

    def task_ids_for(self, batch: int, device: torch.device) -> torch.Tensor:
        """The task id per row of a batch of ``batch`` rows -> LongTensor (batch,) on ``device``."""
        if self.task_id is None:
            raise InputError(f"{type(self).__name__} needs a task id; none was set", key="task_id")
        task_id = self.task_id.to(device)
        if task_id.numel() == 1:
            return task_id.reshape(1).expand(batch)
        if task_id.numel() != batch:
            raise InputError(f"{task_id.numel()} task ids for a batch of {batch}", key="task_id")
        return task_id


def check_task_ids(task_id: torch.Tensor, num_tasks: int, what: str = "model") -> torch.Tensor:
    """Task ids (B,) or (B, 1) of integers in [0, num_tasks) -> LongTensor (B,); InputError otherwise."""
    task_id = torch.as_tensor(task_id).reshape(-1).long()
    known = ((task_id >= 0) & (task_id < num_tasks)).all()
    if task_id.device.type != "cpu":
        # Reading the answer back would stall the device every step. Tag files are checked when read
        # (``data.task_tags.task_ids`` names file and line); here an asserting kernel is the last guard
        # (an unknown id stops the run with a device-side assertion at the next synchronisation).
        torch._assert_async(
            known, f"task_id: a task id is unknown to this {what} (0..{num_tasks - 1})"
        )
        return task_id
    if not known:
        bad = int(task_id[(task_id < 0) | (task_id >= num_tasks)][0])
        raise InputError(
            f"task id {bad} unknown to this {what} (it knows 0..{num_tasks - 1})", key="task_id"
        )
    return task_id


def set_task_id(model: nn.Module, task_id: torch.Tensor | None) -> int:
    """Give every task-conditioned submodule of ``model`` the task ids; returns how many modules got them.

    The ids are checked once per kind of module and number of tasks (every layer of an encoder shares
    both), not once per module: on a GPU each check is a few kernels of every forward."""
    conditioned = [m for m in model.modules() if isinstance(m, TaskConditioned)]
    checked: dict[tuple[int, str], torch.Tensor] = {}
    for module in conditioned:
        if task_id is None:
            module.task_id = None
            continue
        key = (module.num_tasks, module.task_kind)
        if key not in checked:
            checked[key] = check_task_ids(task_id, module.num_tasks, module.task_kind)
        module.task_id = checked[key]
    return len(conditioned)


def gumbel_posterior(logits: torch.Tensor, temperature: float, noise: torch.Tensor | None = None):
    """Eq. (4): q_φ(z=1) = σ((φ + ε(1) - ε(0))/τ); ``logits`` φ (..., H'), ``noise`` ε (2, ..., H') or None.

    None gives the noise-free posterior σ(φ/τ) (inference).
    """
    if noise is None:
        return torch.sigmoid(logits / temperature)
    return torch.sigmoid((logits + noise[1] - noise[0]) / temperature)


def sample_gumbel(shape, like: torch.Tensor) -> torch.Tensor:
    """Standard Gumbel noise ε = -log(-log u), u ~ U(0, 1), of ``shape`` on ``like``'s device/dtype."""
    u = torch.rand(shape, device=like.device, dtype=like.dtype)
    tiny = torch.finfo(like.dtype).tiny
    return -torch.log(-torch.log(u.clamp(min=tiny, max=1.0 - 1e-7)))


def bernoulli_kl(posterior: torch.Tensor, prior: float) -> torch.Tensor:
    """KL(B(q) || B(p)) elementwise = q log(q/p) + (1-q) log((1-q)/(1-p)); ``posterior`` q in (0, 1)."""
    q = posterior.clamp(1e-12, 1.0 - 1e-12)
    return q * torch.log(q / prior) + (1.0 - q) * torch.log((1.0 - q) / (1.0 - prior))


def authors_kl(sample: torch.Tensor, prior: float, eps: float = 1e-7) -> torch.Tensor:
    """The authors' KL term elementwise, y (log(y + eps) - log p) with y the Gumbel-sampled posterior
    (fairseq examples/attention_head_selection/src/loss/attention_head_selection.py): the z = 1 half of
    the Bernoulli KL, of the noisy, tempered sample that selected the heads."""
    return sample * (torch.log(sample + eps) - math.log(prior))


KL_FORMS = ("bernoulli", "authors")


def subset_mask(posterior: torch.Tensor, n_select: int) -> torch.Tensor:
    """Eq. (5): 1 for the ``n_select`` highest posteriors of each row of ``posterior`` (..., H')."""
    top = posterior.topk(n_select, dim=-1).indices
    return torch.zeros_like(posterior).scatter(-1, top, 1.0)


def group_mask(posterior: torch.Tensor, n_select: int) -> torch.Tensor:
    """Eq. (6): H' heads in ``n_select`` contiguous groups; 1 for the argmax of each group (..., H')."""
    grouped = posterior.unflatten(-1, (n_select, -1))  # (..., H, r)
    best = grouped.argmax(dim=-1, keepdim=True)
    return torch.zeros_like(grouped).scatter(-1, best, 1.0).flatten(-2)


SELECTION_MASKS = {"subset": subset_mask, "group": group_mask}  # strategy -> eq. (5) or (6)


def selected_heads(hard: torch.Tensor, n_select: int) -> torch.Tensor:
    """Indices of the ``n_select`` ones of each row of the 0/1 mask ``hard`` (..., H'), ascending.

    A top-k of (H' - index) over the selected heads: the shape is known before the values are, so no
    value is read back to the host (``nonzero`` would)."""
    candidates = hard.size(-1)
    descending = torch.arange(candidates, 0, -1, device=hard.device, dtype=hard.dtype)
    return (hard * descending).topk(n_select, dim=-1).indices


def check_selection_config(
    n_head: int, head_candidates: int, strategy: str, temperature: float, logit_init: str = "spread"
):
    if logit_init not in LOGIT_INITS:
        raise ConfigError(
            f"'{logit_init}' is not one of {tuple(LOGIT_INITS)}", key="selection_logit_init"
        )
    if strategy not in STRATEGIES:
        raise ConfigError(f"'{strategy}' is not one of {STRATEGIES}", key="selection_strategy")
    if head_candidates < n_head:
        raise ConfigError(
            f"{head_candidates} candidates cannot give {n_head} heads", key="head_candidates"
        )
    if strategy == "group" and head_candidates % n_head:
        raise ConfigError(
            f"the group strategy needs a multiple of {n_head} heads, got {head_candidates}",
            key="head_candidates",
        )
    if not temperature > 0:
        raise ConfigError(
            f"the temperature must be > 0, got {temperature}", key="gumbel_temperature"
        )


def check_kl_form(kl_form: str) -> None:
    if kl_form not in KL_FORMS:
        raise ConfigError(f"'{kl_form}' is not one of {KL_FORMS}", key="selection_kl_form")


class HeadSelectionAttention(TaskConditioned):
    """Self-attention with ``head_candidates`` (H') heads of width ``n_feat``/``n_head``, H per task.

    Drop-in for ESPnet's ``MultiHeadedAttention`` (same ``forward(query, key, value, mask)``, same mask
    convention, same parameter names); with H' = H it computes ESPnet's attention exactly.
    ``selection_kl`` holds the KL term per utterance (B,), the mean over the H' heads of its task, of the
    last training forward (None otherwise); ``kl_form`` picks eq. (3)'s or the authors' term (``kl``).
    """

    task_kind = "head-selection layer"

    def __init__(
        self,
        n_head: int,
        n_feat: int,
        dropout_rate: float,
        num_tasks: int,
        head_candidates: int,
        strategy: str = "group",
        temperature: float = 1.0,
        logit_init: str = "spread",
        inference_noise: bool = False,
        kl_form: str = "bernoulli",
    ):
        super().__init__()
        check_selection_config(n_head, head_candidates, strategy, temperature, logit_init)
        check_kl_form(kl_form)
        self.inference_noise, self.kl_form = inference_noise, kl_form
        if num_tasks < 1:
            raise ConfigError(f"needs at least one task, got {num_tasks}", key="num_tasks")
        self.h, self.d_k = n_head, n_feat // n_head
        self.head_candidates, self.num_tasks = head_candidates, num_tasks
        self.strategy, self.temperature = strategy, temperature
        width = head_candidates * self.d_k
        self.linear_q = nn.Linear(n_feat, width)
        self.linear_k = nn.Linear(n_feat, width)
        self.linear_v = nn.Linear(n_feat, width)
        self.linear_out = nn.Linear(n_head * self.d_k, n_feat)
        self.dropout = nn.Dropout(p=dropout_rate)
        self.selection_logits = nn.Parameter(torch.empty(num_tasks, head_candidates))
        nn.init.uniform_(self.selection_logits, *LOGIT_INITS[logit_init])
        self.prior = n_head / head_candidates
        # row offsets of q, k and v in their weights stacked (3 H' d_k, d) per device, for ``qkv_rows``: a
        # constant, not a buffer (DDP would broadcast a buffer from rank 0 at every forward)
        self._qkv_offsets: dict[torch.device, torch.Tensor] = {}
        self.selection_kl: torch.Tensor | None = None
        self.sample: torch.Tensor | None = None  # the posterior of the last selections
        self.drawn: tuple | None = (
            None  # this forward's draw, made with other layers' (draw_together)
        )
        self._fixed: tuple | None = None  # see fixed_projections

    def draw(
        self, logits: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Selections of the logits ``logits`` (..., n, H') of n tasks (of one layer, or of several stacked):
        ascending head indices (..., n, H), their scales (..., n, H), the posterior they were selected
        from (..., n, H') and the KL term of each task (..., n), the mean over its H' heads (``kl``). In
        training (and at inference with ``inference_noise``) one Gumbel draw per task, layer by layer and
        task by task in the given order, as drawing each task's (2, H') in turn."""
        noise = None
        if self.training or self.inference_noise:
            shape = (*logits.shape[:-1], 2, logits.size(-1))
            noise = sample_gumbel(shape, logits).movedim(-2, 0)  # (2, ..., n, H')
        posterior = gumbel_posterior(logits, self.temperature, noise)
        hard = SELECTION_MASKS[self.strategy](posterior, self.h)
        heads = selected_heads(hard, self.h)
        scale = (hard + posterior - posterior.detach()) if self.training else hard
        return heads, scale.gather(-1, heads), posterior, self.task_kl(logits, posterior)

    def selections(self, tasks: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Selected heads of ``tasks`` (n,) (every task when None): ascending head indices (n, H) and
        their scales (n, H) (``draw``). ``sample`` keeps the posterior (n, H') they were selected from."""
        logits = self.selection_logits
        logits = logits if tasks is None else logits.index_select(0, tasks)
        heads, scale, self.sample, _ = self.draw(logits)
        return heads, scale

    def selection(self, task: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Selected heads of one ``task``: ascending head indices (H,) and their scales (H,)."""
        heads, scale = self.selections(torch.tensor([task], device=self.selection_logits.device))
        return heads[0], scale[0]

    def head_rows(self, heads: torch.Tensor) -> torch.Tensor:
        """Rows of the H'-head projection weights that belong to ``heads`` (..., H) -> (..., H * d_k)."""
        offsets = torch.arange(self.d_k, device=heads.device)
        return (heads.unsqueeze(-1) * self.d_k + offsets).flatten(-2)

    def qkv_rows(self, heads: torch.Tensor) -> torch.Tensor:
        """``head_rows`` of q, k and v in their weights stacked (3 H' d_k, d), side by side:
        (..., H) -> (..., 3 * H * d_k) (two kernels: every layer's at once under ``draw_together``)."""
        offsets = self._qkv_offsets.get(heads.device)
        if offsets is None:  # (3, 1, d_k), made once per device
            width = self.head_candidates * self.d_k
            offsets = torch.arange(3, device=heads.device)[:, None, None] * width
            offsets = offsets + torch.arange(self.d_k, device=heads.device)
            self._qkv_offsets[heads.device] = offsets
        return (heads[..., None, :, None] * self.d_k + offsets).flatten(-3)

    @staticmethod
    def project(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, rows: torch.Tensor):
        """``x`` (b, T, d) through the ``rows`` of ``weight`` (n, d) and ``bias`` (n,) -> (b, T, len(rows)).

        ``rows`` (r,) serve every utterance (one matmul); (b, r) give each utterance its own task's rows
        (one batched matmul of the gathered weights: the FLOPs of one task's product, at the price of a
        copy of the rows per utterance. Projecting all H' candidates and gathering each utterance's
        columns instead doubles the products at H' = 2H, measured slower on an H100: docs/gpu.md)."""
        return HeadSelectionAttention._project_rows(x, *gather_rows(weight, bias, rows))

    def attend(
        self, heads, scale, query, key, value, mask, qkv_rows=None, qkv_projection=None
    ) -> torch.Tensor:
        """ESPnet's scaled dot-product attention over the selected heads -> (b, T1, d).

        ``heads``/``scale`` (1, H) for every utterance or (b, H) per utterance; when already known
        (``draw_together``) their ``qkv_rows`` (b, 3 H d_k), or those rows of q, k and v gathered,
        ``qkv_projection``: weight (3 H d_k, d) and bias (3 H d_k,) for every utterance.
        Self-attention projects q, k and v in one product."""
        if query is key and key is value:
            if qkv_projection is None:
                rows = self.qkv_rows(heads) if qkv_rows is None else qkv_rows
                weight = torch.cat([lin.weight for lin in self.qkv])
                bias = torch.cat([lin.bias for lin in self.qkv])
                rows = rows[0] if rows.size(0) == 1 else rows
                projected = self.project(query, weight, bias, rows)
            else:
                projected = self._project_rows(query, *qkv_projection)
            projected = projected.chunk(3, dim=-1)
        else:
            rows = self.head_rows(heads[0] if heads.size(0) == 1 else heads)
            projected = [
                self.project(x, lin.weight, lin.bias, rows)
                for lin, x in zip(self.qkv, (query, key, value))
            ]
        q, k, v = (y.unflatten(-1, (self.h, self.d_k)).transpose(1, 2) for y in projected)
        return self.attention(q, k, v, mask, scale)

    def attention(self, q, k, v, mask, scale: torch.Tensor | None = None) -> torch.Tensor:
        """Scaled dot-product attention of (b, H, T, d_k) heads, each head's context times its ``scale``
        (b|1, H) (none: 1), then W^O -> (b, T1, d)."""
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_k)
        if mask is not None:
            blocked = mask.unsqueeze(1).eq(0)  # (b, 1, 1|T1, T2)
            scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)
            weights = torch.softmax(scores, dim=-1).masked_fill(blocked, 0.0)
        else:
            weights = torch.softmax(scores, dim=-1)
        x = torch.matmul(self.dropout(weights), v)
        if scale is not None:
            x = x * scale[:, :, None, None]
        return self.linear_out(x.transpose(1, 2).flatten(2))

    @property
    def qkv(self) -> tuple[nn.Linear, nn.Linear, nn.Linear]:
        return self.linear_q, self.linear_k, self.linear_v

    def fixed_projections(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Inference without noise: every task's selected heads' rows of the q, k and v projections, one
        (weight, bias) of (num_tasks, 3 * H * d_k, d) and (num_tasks, 3 * H * d_k) (q, k, v rows in turn),
        gathered once and reused while the parameters are the ones they were gathered from. The selection
        is then fixed per task, and a beam search calls each decoder layer once per step: the selection's
        and the gather's kernels would otherwise run at every step of every layer; q, k and v side by side
        make self-attention's projections one product. The key is each parameter's storage, in-place
        version and dtype (an optimizer step, ``load_state_dict`` or ``.to()`` changes one of them)."""
        params = (self.selection_logits, *(p for lin in self.qkv for p in (lin.weight, lin.bias)))
        state = tuple((p.data_ptr(), p._version, p.dtype) for p in params)
        if self._fixed is None or self._fixed[0] != state:
            heads, _ = self.selections()
            weight = torch.cat([lin.weight for lin in self.qkv])
            bias = torch.cat([lin.bias for lin in self.qkv])
            self._fixed = (state, gather_rows(weight, bias, self.qkv_rows(heads)))
        return self._fixed[1]

    def attend_fixed(self, task_id, query, key, value, mask) -> torch.Tensor:
        """``attend`` with ``fixed_projections``: ESPnet's attention at H heads, every scale 1 (eval)."""
        weight, bias = self.fixed_projections()
        if self.task_id.numel() == 1:  # one task for every row (beam search): its rows alone
            weight, bias = weight.index_select(0, task_id[:1]), bias.index_select(0, task_id[:1])
        else:  # each row its task's rows
            weight, bias = weight.index_select(0, task_id), bias.index_select(0, task_id)
        if query is key and key is value:  # self-attention: q, k and v in one product
            projected = self._project_rows(query, weight, bias).chunk(3, dim=-1)
        else:
            width = self.h * self.d_k
            projected = [
                self._project_rows(
                    x, weight[:, i * width : (i + 1) * width], bias[:, i * width : (i + 1) * width]
                )
                for i, x in enumerate((query, key, value))
            ]
        heads = [y.unflatten(-1, (self.h, self.d_k)).transpose(1, 2) for y in projected]
        return self.attention(*heads, mask)

    @staticmethod
    def _project_rows(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """x (b, T, d) through gathered rows (n, d) | (1 | b, n, d) and bias (n,) | (1 | b, n) -> (b, T, n):
        one matmul for one task, one batched matmul for a row per task."""
        if weight.dim() == 2:
            return F.linear(x, weight, bias)
        if weight.size(0) == 1:
            return F.linear(x, weight[0], bias[0])
        return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))

    def task_kl(self, logits: torch.Tensor, posterior: torch.Tensor) -> torch.Tensor:
        """The KL term of each task of ``logits`` / ``posterior`` (..., n, H'), averaged over the H' heads
        -> (..., n).

        ``kl_form`` "bernoulli": eq. (3), KL(B(σ(φ)) || B(H/H')); "authors": the authors' term,
        ``authors_kl`` of the posterior the selection was drawn from. The mean over heads (not the sum) is
        the authors' normalisation (``HeadSelectionLoss`` divides by layers x heads). With H' = H every
        head is used whatever φ says (prior 1): there is no selection to regularise.
        """
        if self.head_candidates == self.h:
            return logits.new_zeros(logits.shape[:-1])
        if self.kl_form == "authors":
            return authors_kl(posterior, self.prior).mean(-1)
        return bernoulli_kl(torch.sigmoid(logits), self.prior).mean(-1)

    def forward(self, query, key, value, mask, expand_kv: bool = False) -> torch.Tensor:
        if expand_kv:
            raise ConfigError("head selection does not support expand_kv decoding", key="expand_kv")
        task_id = self.task_ids_for(query.size(0), query.device)
        if not (self.training or self.inference_noise or torch.is_grad_enabled()):
            # a fixed selection per task: gathered once (fixed_projections)
            self.selection_kl = None
            return self.attend_fixed(task_id, query, key, value, mask)
        # one task for every row (beam search): its selection alone
        one_task = self.task_id.numel() == 1
        rows = projection = None
        if self.drawn is not None:  # drawn with the other layers', per row there (draw_together)
            heads, scale, self.sample, kl, rows, projection = self.drawn
        else:
            logits = self.selection_logits
            heads, scale, self.sample, kl = self.draw(
                logits.index_select(0, task_id[:1]) if one_task else logits
            )
            if not one_task:  # every task's selection, gathered per row
                heads, scale, kl = (x.index_select(0, task_id) for x in (heads, scale, kl))
        if one_task:
            kl = kl.expand(task_id.size(0))
        self.selection_kl = kl if self.training else None
        return self.attend(heads, scale, query, key, value, mask, rows, projection)


@contextmanager
def draw_together(layers: Sequence[HeadSelectionAttention]):
    """Within the block, ``layers`` (the self-attention of a stack of layers, given the same task ids by
    ``set_task_id``) select with one draw for all: their logits stacked (L, n, H'), one Gumbel draw, mask,
    top-k, straight-through scale and KL for all L layers (``HeadSelectionAttention.draw``) and the rows
    of q, k and v the selected heads project with (``qkv_rows``; for ids per row each row's task's, and
    for one task those rows gathered from every layer's weights at once), each layer then taking its slice.
    Per layer these are some 60 small kernels of each forward and backward, which on a GPU cost launches,
    not arithmetic. Layer by layer and task by task, the noise is drawn in the order the layers would
    draw it themselves. Layers of other options or task ids draw on their own; the fixed-selection
    inference path (``fixed_projections``) needs no draw. The gathered rows serve self-attention (a
    layer called otherwise projects from its heads itself)."""

    def setting(layer):  # what the draw depends on; the task ids as views of one tensor
        ids = layer.task_id
        ids = None if ids is None else (ids.data_ptr(), ids.shape, ids.device)
        options = (layer.training, layer.inference_noise, layer.strategy, layer.temperature)
        return ids, options, layer.h, layer.d_k, layer.kl_form, layer.selection_logits.shape

    first = layers[0] if layers else None
    together = (
        first is not None
        and first.task_id is not None
        and (first.training or first.inference_noise or torch.is_grad_enabled())
        and all(setting(layer) == setting(first) for layer in layers)
    )
    if together:
        logits = torch.stack([layer.selection_logits for layer in layers])  # (L, tasks, H')
        if first.task_id.numel() == 1:
            logits = logits.index_select(1, first.task_id.reshape(1).to(logits.device))
        heads, scale, posterior, kl = first.draw(logits)
        rows = first.qkv_rows(heads)
        if first.task_id.numel() > 1:  # each row its task's selection; each layer gathers its rows
            ids = first.task_id.to(logits.device)
            heads, scale, kl, rows = (x.index_select(1, ids) for x in (heads, scale, kl, rows))
            # (gathered here for all layers, the b copies of every layer's rows would have their
            # gradients stacked, one more copy of them all, before they reach the weights)
            projections = [None] * len(layers)
        else:  # one task: its rows of every layer's weights (L, 3 H d_k, d), gathered at once
            projections = zip(*(x.unbind() for x in _gather_qkv_rows(layers, rows[:, 0])))
            rows = [None] * len(layers)
        for layer, layer_drawn in zip(layers, zip(heads, scale, posterior, kl, rows, projections)):
            layer.drawn = layer_drawn
    try:
        yield
    finally:
        for layer in layers:
            layer.drawn = None


def _gather_qkv_rows(
    layers: Sequence[HeadSelectionAttention], rows: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows ``rows`` (L, ..., r) of each layer's q, k and v weights stacked (3 H' d_k, d), gathered for all
    L layers at once -> weights (L, ..., r, d) and biases (L, ..., r): one gather forward and one
    backward instead of a concatenation and a gather per layer."""
    width = 3 * layers[0].head_candidates * layers[0].d_k
    weight = torch.cat([lin.weight for layer in layers for lin in layer.qkv])
    bias = torch.cat([lin.bias for layer in layers for lin in layer.qkv])
    offsets = (
        torch.arange(len(layers), device=rows.device).view(-1, *[1] * (rows.dim() - 1)) * width
    )
    return gather_rows(weight, bias, rows + offsets)


def gather_rows(
    weight: torch.Tensor, bias: torch.Tensor, rows: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``rows`` (..., r) of ``weight`` (n, d) and ``bias`` (n,) -> ((..., r, d), (..., r)): one gather
    each, whatever the rows' leading shape."""
    flat = rows.flatten()
    gathered = weight.index_select(0, flat).unflatten(0, rows.shape)
    return gathered, bias.index_select(0, flat).view(rows.shape)
