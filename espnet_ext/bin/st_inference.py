"""ESPnet2's ``espnet2.bin.st_inference`` with our classes registered, the LM vocabulary checked,
``--matched_inference true|false``, fairseq/espresso's ``eos_threshold`` / ``lenpen`` / ``fairseq_stop`` and
per-utterance task tags (see espnet_ext.bin.inference_entry), on models of our ST task's ``--model`` choices
(espnet_ext.tasks.st)."""

from espnet_ext.registry import install

install()  # our classes into ESPnet2's tasks, before ESPnet is imported (espnet_ext.registry)

from espnet2.bin import st_inference

from espnet_ext.bin.inference_entry import OurDecoding, run
from espnet_ext.tasks.st import ModelChoiceLoading, STTask


class Speech2Text(OurDecoding, ModelChoiceLoading, st_inference.Speech2Text):
    """ESPnet's Speech2Text taking our decoding options and per-utterance task ids, building the model
    class the training config chose."""

    model_attr = "st_model"


def main(cmd=None):
    run(Speech2Text, STTask, st_inference.get_parser, cmd)


if __name__ == "__main__":
    main()
