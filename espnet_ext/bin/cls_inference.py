"""Classify the images of an scp with a trained model; writes ``<id> <class>`` lines (Kaldi text).

    python -m espnet_ext.bin.cls_inference --data_path_and_name_and_type dump/test/image.scp,image,image \
        --model_file exp/cls/valid.acc.best.pth --output_file exp/cls/decode_test/text

The class is the name from the training ``--class_list``, or the index when training had none.
"""

import torch

from espnet_ext.fileio import atomic_write
from espnet_ext.tasks.abs_ext_task import inference_batches, inference_main, inference_parser
from espnet_ext.tasks.image_classification import ImageClassificationTask, class_names


def get_parser():
    return inference_parser(__doc__.splitlines()[0])


@torch.no_grad()
def inference(args) -> None:
    model, train_args = ImageClassificationTask.build_model_from_file(
        args.train_config, args.model_file, args.device
    )
    model.eval()
    names = class_names(train_args)
    with atomic_write(args.output_file) as out:
        for ids, batch in inference_batches(ImageClassificationTask, train_args, args):
            for key, index in zip(ids, model.classify(batch["image"]).argmax(-1).tolist()):
                out.write(f"{key} {index if names is None else names[index]}\n")


def main(cmd=None):
    inference_main(get_parser, inference, cmd)


if __name__ == "__main__":
    main()
