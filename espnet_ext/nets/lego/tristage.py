"""The tri-stage LR schedule of Appendix C (Table XII) as ESPnet2's ``tristagelr`` configuration.

ESPnet's ``TristageLR`` (after fairseq's ``tri_stage``) is the paper's schedule: linear warm-up from the
start LR to the peak, a hold at the peak, exponential decay to the end LR, then the end LR. It takes the
stages as fractions of ``max_steps`` and the LRs as scales of the optimiser's LR; the paper gives step
counts and absolute LRs, so this converts one into the other (and refuses counts that do not add up).
Checked against hand-computed values in the tests. One difference from fairseq: ESPnet's scheduler is
one step ahead (after n updates it has set the LR of step n + 1), 1/35000 of the warm-up.
"""

from __future__ import annotations

from espnet_ext.errors import ConfigError


def tristage_conf(
    start_lr: float,
    max_lr: float,
    end_lr: float,
    total_steps: int,
    warmup_steps: int,
    hold_steps: int,
) -> dict:
    """-> ``{"optim_conf": {"lr": max_lr}, "scheduler": "tristagelr", "scheduler_conf": {...}}``."""
    if not 0 < start_lr <= max_lr or not 0 < end_lr <= max_lr:
        raise ConfigError(
            f"needs 0 < start_lr, end_lr <= max_lr; got {start_lr}, {end_lr}, {max_lr}", key="lr"
        )
    decay_steps = total_steps - warmup_steps - hold_steps
    if min(warmup_steps, hold_steps, decay_steps) < 0:
        raise ConfigError(
            f"warm-up {warmup_steps} + hold {hold_steps} exceed {total_steps} steps",
            key="scheduler_conf",
        )
    return {
        "optim_conf": {"lr": max_lr},
        "scheduler": "tristagelr",
        "scheduler_conf": {
            "max_steps": total_steps,
            "warmup_ratio": warmup_steps / total_steps,
            "hold_ratio": hold_steps / total_steps,
            "decay_ratio": decay_steps / total_steps,
            "init_lr_scale": start_lr / max_lr,
            "final_lr_scale": end_lr / max_lr,
        },
    }
