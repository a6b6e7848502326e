"""ESPnet2's ``espnet2.bin.st_inference`` with our classes registered, the LM vocabulary checked,
``--matched_inference true|false`` and fairseq/espresso's ``eos_threshold`` / ``lenpen`` /
``fairseq_stop`` (see espnet_ext.bin.inference_entry)."""

from espnet_ext.registry import install

install()  # our classes into ESPnet2's tasks, before ESPnet is imported (espnet_ext.registry)

from espnet2.bin.st_inference import Speech2Text, main
from espnet2.tasks.st import STTask

from espnet_ext.bin.inference_entry import run

if __name__ == "__main__":
    run(main, STTask, "--st_train_config", Speech2Text)
