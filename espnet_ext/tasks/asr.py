"""ESPnet2's ASR task with the checks our training tasks share (``espnet_ext.tasks.attention_plots``)."""

from __future__ import annotations

from espnet2.tasks import asr

from espnet_ext.tasks.attention_plots import AttentionPlotCheck
from espnet_ext.tasks.task_conditioned import OneTaskBatches
from espnet_ext.tasks.trainer import InterruptSafeTrainer


class ASRTask(OneTaskBatches, AttentionPlotCheck, asr.ASRTask):
    """ESPnet2's ASR task; refuses attention plots of a model that keeps no attention weights."""

    trainer = InterruptSafeTrainer
