"""ESPnet2's ``espnet2.bin.mt_inference`` with our classes registered, the LM vocabulary checked,
``--matched_inference true|false``, fairseq/espresso's ``eos_threshold`` / ``lenpen`` / ``fairseq_stop`` and
per-utterance task tags (see espnet_ext.bin.inference_entry)."""

from espnet_ext.registry import install

install()  # our classes into ESPnet2's tasks, before ESPnet is imported (espnet_ext.registry)

from espnet2.bin import mt_inference

from espnet_ext.bin.inference_entry import OurDecoding, run
from espnet_ext.tasks.mt import MTTask


class Text2Text(OurDecoding, mt_inference.Text2Text):
    """ESPnet's Text2Text taking our decoding options and per-utterance task ids."""

    model_attr = "mt_model"


def main(cmd=None):
    run(Text2Text, MTTask, mt_inference.get_parser, cmd)


if __name__ == "__main__":
    main()
