"""Recognize the text in the images of an scp (greedy CTC); writes ``<id> <text>`` lines (Kaldi text).

    python -m espnet_ext.bin.ocr_inference --data_path_and_name_and_type dump/test/image.scp,image,image \
        --model_file exp/ocr/valid.acc.best.pth --output_file exp/ocr/decode_test/text
"""

import torch

from espnet_ext.fileio import atomic_write
from espnet_ext.tasks.abs_ext_task import TextPreprocessor, inference_batches, inference_parser, inference_main
from espnet_ext.tasks.image_to_sequence import ImageToSequenceTask


def get_parser():
    return inference_parser(__doc__.splitlines()[0])


@torch.no_grad()
def inference(args) -> None:
    model, train_args = ImageToSequenceTask.build_model_from_file(args.train_config, args.model_file, args.device)
    model.eval()
    text = TextPreprocessor.from_args(train_args, train=False)
    with atomic_write(args.output_file) as out:
        for ids, batch in inference_batches(ImageToSequenceTask, train_args, args):
            for key, token_ids in zip(ids, model.recognize(batch["image"], batch["image_lengths"])):
                out.write(f"{key} {text.ids_to_text(token_ids)}".rstrip() + "\n")


def main(cmd=None):
    inference_main(get_parser, inference, cmd)


if __name__ == "__main__":
    main()
