"""Recognize the text in the images of an scp (greedy decoding); writes ``<id> <text>`` lines (Kaldi text).

    python -m espnet_ext.bin.ocr_inference --data_path_and_name_and_type dump/test/image.scp,image,image \
        --model_file exp/ocr/valid.acc.best.pth --output_file exp/ocr/decode_test/text \
        [--entropy_file .../entropy] [--plot_dir .../plots --num_plots 8]

Attention recognisers also give the mean attention entropy H[a_t] per image (``<id> <H>``) and per-step
pictures of what they looked at (espnet_ext.analysis.attention_patches).
"""

from espnet_ext.registry import install

install(tasks=())  # typeguard's checks off before ESPnet is imported (espnet_ext.registry)

import torch

from espnet_ext.analysis.attention_patches import plot_steps
from espnet_ext.fileio import atomic_write
from espnet_ext.nets.sharp.attention import attention_entropy
from espnet_ext.tasks.abs_ext_task import (
    TextPreprocessor,
    inference_batches,
    inference_main,
    inference_parser,
)
from espnet_ext.tasks.image_to_sequence import ImageToSequenceTask


def get_parser():
    parser = inference_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--entropy_file", default=None, help="attention models: write <id> <mean H[a_t]>"
    )
    parser.add_argument(
        "--plot_dir", default=None, help="attention models: per-step PNGs of the first images"
    )
    parser.add_argument("--num_plots", type=int, default=8)
    return parser


@torch.no_grad()
def inference(args) -> None:
    model, train_args = ImageToSequenceTask.build_model_from_file(
        args.train_config, args.model_file, args.device
    )
    model.eval()
    text = TextPreprocessor.from_args(train_args, train=False)
    attention = hasattr(model, "attention")
    if (args.entropy_file or args.plot_dir) and not attention:
        raise SystemExit(
            f"error: --entropy_file/--plot_dir need an attention model, not {type(model).__name__}"
        )
    entropies, plotted = {}, 0
    with atomic_write(args.output_file) as out:
        for ids, batch in inference_batches(ImageToSequenceTask, train_args, args):
            if not attention:
                for key, token_ids in zip(
                    ids, model.recognize(batch["image"], batch["image_lengths"])
                ):
                    out.write(f"{key} {text.ids_to_text(token_ids)}".rstrip() + "\n")
                continue
            hypotheses, details, images = model.recognize(
                batch["image"], batch["image_lengths"], return_steps=True
            )
            for key, token_ids, steps, image in zip(ids, hypotheses, details, images):
                out.write(f"{key} {text.ids_to_text(token_ids)}".rstrip() + "\n")
                alphas = torch.stack([alpha for _, alpha, _ in steps]).unsqueeze(0)
                entropies[key] = attention_entropy(alphas, torch.ones(alphas.shape[:2])).item()
                if args.plot_dir and plotted < args.num_plots:
                    symbols = [
                        train_args.token_list[t] if t != model.eos else "</s>" for t, _, _ in steps
                    ]
                    plot_steps(
                        image[0].cpu().numpy(),
                        steps,
                        symbols,
                        f"{args.plot_dir}/{key}.png",
                        title=f"{key}: {text.ids_to_text(token_ids)} ({model.attention} attention)",
                    )
                    plotted += 1
    if args.entropy_file:
        with atomic_write(args.entropy_file) as f:
            f.writelines(f"{key} {value:.6f}\n" for key, value in entropies.items())


def main(cmd=None):
    inference_main(get_parser, inference, cmd)


if __name__ == "__main__":
    main()
