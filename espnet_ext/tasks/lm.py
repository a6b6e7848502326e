"""ESPnet2's LM task, trained with our trainer (``espnet_ext.tasks.trainer``)."""

from __future__ import annotations

from espnet2.tasks import lm

from espnet_ext.tasks.trainer import InterruptSafeTrainer


class LMTask(lm.LMTask):
    """ESPnet2's LM task; its checkpoint survives a job stopped while saving it."""

    trainer = InterruptSafeTrainer
