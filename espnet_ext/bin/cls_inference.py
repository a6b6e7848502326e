"""Classify the images of an scp with a trained model; writes ``<id> <class>`` lines (Kaldi text).

    python -m espnet_ext.bin.cls_inference --data_path_and_name_and_type dump/test/image.scp,image,image \
        --model_file exp/cls/valid.acc.best.pth --output_file exp/cls/decode_test/text

The class is the name from the training ``--class_list``, or the index when training had none.
``--topk_file`` also writes the k most likely classes per image, best first (top-k accuracy);
``--matched_inference true|false`` switches relaxed window attention at test time (default: as trained).
"""

from espnet_ext.registry import install

install(tasks=())  # typeguard's checks off before ESPnet is imported (espnet_ext.registry)

import contextlib

import torch
from espnet2.utils.types import str2bool, str_or_none

from espnet_ext.attention.window import WindowAttention
from espnet_ext.fileio import atomic_write
from espnet_ext.tasks.abs_ext_task import inference_batches, inference_main, inference_parser
from espnet_ext.tasks.image_classification import ImageClassificationTask, class_names


def get_parser():
    parser = inference_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--topk_file", type=str_or_none, default=None, help="'<id> <class 1> ... <class k>' lines"
    )
    parser.add_argument("--topk", type=int, default=5, help="k of --topk_file")
    parser.add_argument(
        "--matched_inference",
        type=str2bool,
        default=None,
        help="relax window attention at inference (default: the training config's choice)",
    )
    return parser


@torch.no_grad()
def inference(args) -> None:
    model, train_args = ImageClassificationTask.build_model_from_file(
        args.train_config, args.model_file, args.device
    )
    model.eval()
    if args.matched_inference is not None:
        for module in model.modules():
            if isinstance(module, WindowAttention):
                module.matched_inference = args.matched_inference
    names = class_names(train_args)

    def name(index: int) -> str:
        return str(index) if names is None else names[index]

    with contextlib.ExitStack() as files:
        out = files.enter_context(atomic_write(args.output_file))
        topk = None if args.topk_file is None else files.enter_context(atomic_write(args.topk_file))
        for ids, batch in inference_batches(ImageClassificationTask, train_args, args):
            logits = model.classify(batch["image"])
            ranked = logits.topk(min(args.topk, logits.size(-1)), dim=-1).indices.tolist()
            for key, best in zip(ids, ranked):
                out.write(f"{key} {name(best[0])}\n")
                if topk is not None:
                    topk.write(f"{key} {' '.join(name(i) for i in best)}\n")


def main(cmd=None):
    inference_main(get_parser, inference, cmd)


if __name__ == "__main__":
    main()
