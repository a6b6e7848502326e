"""ESPnet2's ``espnet2.bin.asr_inference`` with our classes registered, the LM vocabulary checked,
``--matched_inference true|false`` and fairseq/espresso's ``eos_threshold`` / ``lenpen`` /
``fairseq_stop`` (see espnet_ext.bin.inference_entry)."""

from espnet_ext.registry import install

install()  # our classes into ESPnet2's tasks, before ESPnet is imported (espnet_ext.registry)

from espnet2.bin.asr_inference import Speech2Text, main
from espnet2.tasks.asr import ASRTask

from espnet_ext.bin.inference_entry import run

if __name__ == "__main__":
    run(main, ASRTask, "--asr_train_config", Speech2Text)
