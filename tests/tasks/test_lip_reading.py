"""LipReadingTask: the visual frontend, YAML -> ESPnet's ASR model on video, training, resume, beam search decoding."""

import re

import numpy as np
import pytest
import torch
from espnet2.asr.encoder.transformer_encoder import TransformerEncoder
from training_checks import assert_trained_and_resumed, write_table

from espnet_ext.bin import vsr_inference
from espnet_ext.errors import InputError
from espnet_ext.nets.baselines.visual_frontend import Conv3dResNetFrontend, ESPnetVSRModel
from espnet_ext.tasks.lip_reading import LipReadingTask

CONFIG = """\
frontend: conv3d_resnet18
frontend_conf:
    relu_type: relu
    resnet_stages: 1
    output_size: 32
normalize: null
encoder: transformer
encoder_conf:
    output_size: 32
    attention_heads: 2
    linear_units: 64
    num_blocks: 1
    input_layer: linear
    dropout_rate: 0.0
decoder: transformer
decoder_conf:
    attention_heads: 2
    linear_units: 64
    num_blocks: 1
    dropout_rate: 0.0
model_conf:
    ctc_weight: 0.3
batch_type: sorted
batch_size: 4
optim: adam
optim_conf:
    lr: 0.005
"""
TOKENS = ["<blank>", "<unk>", "a", "b", "c", "<sos/eos>"]
SIZE = 24


def mouth(char: str) -> np.ndarray:
    """A 24x24 grey frame per 'viseme': wide open, closed line, small round."""
    rows, cols = np.mgrid[0:SIZE, 0:SIZE] - SIZE / 2 + 0.5
    radii = {"a": (6, 9), "b": (1.5, 9), "c": (4, 4)}[char]
    return np.where((rows / radii[0]) ** 2 + (cols / radii[1]) ** 2 <= 1, 230, 20).astype(np.uint8)


def write_videos(data, videos, names, rng):
    """Per character two frames of its mouth shape and a rest frame; .npy frames, the last two as .mp4 (OpenCV)."""
    import cv2

    rows = []
    for i, name in enumerate(names):
        text = "".join(rng.choice(list("abc"), size=rng.integers(2, 5)))
        text = re.sub(
            r"(.)\1+", r"\1", text
        )  # no repeated neighbours: a tiny attention decoder learns fast
        rest = np.full((1, SIZE, SIZE), 20, np.uint8)
        frames = np.concatenate([rest] + [np.stack([mouth(c), mouth(c), rest[0]]) for c in text])
        if i >= len(names) - 2:
            path = videos / f"{name}.mp4"
            writer = cv2.VideoWriter(
                str(path), cv2.VideoWriter_fourcc(*"mp4v"), 25, (SIZE, SIZE), isColor=False
            )
            for frame in frames:
                writer.write(frame)
            writer.release()
        else:
            path = videos / f"{name}.npy"
            np.save(path, frames)
        rows.append((name, path, text))
    data.mkdir(parents=True)
    write_table(data / "video.scp", [(key, path) for key, path, _ in rows])
    write_table(data / "text", [(key, text) for key, _, text in rows])


@pytest.fixture()
def corpus(tmp_path):
    pytest.importorskip("cv2", reason="opencv-python-headless is not installed")
    rng = np.random.default_rng(0)
    (tmp_path / "videos").mkdir()
    write_videos(
        tmp_path / "data" / "train", tmp_path / "videos", [f"v{i:02d}" for i in range(40)], rng
    )
    write_videos(
        tmp_path / "data" / "test", tmp_path / "videos", [f"t{i:02d}" for i in range(8)], rng
    )
    (tmp_path / "tokens.txt").write_text("\n".join(TOKENS) + "\n")
    (tmp_path / "config.yaml").write_text(CONFIG)
    return tmp_path


def task_args(corpus):
    return [
        "--config",
        str(corpus / "config.yaml"),
        "--token_list",
        str(corpus / "tokens.txt"),
        "--token_type",
        "char",
    ]


def data_args(corpus):
    args = []
    for phase, data in (("train", corpus / "data" / "train"), ("valid", corpus / "data" / "test")):
        args += [
            f"--{phase}_data_path_and_name_and_type",
            f"{data / 'video.scp'},video,video",
            f"--{phase}_data_path_and_name_and_type",
            f"{data / 'text'},text,text",
        ]
    return args


def test_frontend_shapes_options_and_padding():
    torch.manual_seed(0)
    full = Conv3dResNetFrontend()
    light = Conv3dResNetFrontend(resnet_stages=2, frame_pool=2, output_size=48)
    assert full.output_size() == 512 and light.output_size() == 48
    assert (
        sum(p.numel() for p in light.parameters()) < sum(p.numel() for p in full.parameters()) / 10
    )
    video = torch.rand(2, 7, 88, 88)
    lengths = torch.tensor([7, 4])
    features, out_lengths = light(video, lengths)
    assert features.shape == (2, 7, 48) and out_lengths.tolist() == [7, 4]
    # Padded frames give zeros, and a short video gives the same features alone as in a padded
    # batch.
    light.eval()
    with torch.no_grad():
        batched, _ = light(video, lengths)
        alone, _ = light(video[1:, :4], lengths[1:])
    assert batched[1, 4:].abs().max() == 0
    torch.testing.assert_close(batched[1, :4], alone[0], atol=1e-5, rtol=1e-5)


def test_model_is_built_from_yaml_through_the_task(corpus):
    args = LipReadingTask.get_parser().parse_args(task_args(corpus))
    model = LipReadingTask.build_model(args)
    assert isinstance(model, ESPnetVSRModel) and isinstance(model.frontend, Conv3dResNetFrontend)
    assert isinstance(model.encoder, TransformerEncoder)  # ESPnet's own table, reused
    loss, stats, _ = model(
        video=torch.rand(2, 9, SIZE, SIZE),
        video_lengths=torch.tensor([9, 6]),
        text=torch.tensor([[2, 3, 4], [4, 2, -1]]),
        text_lengths=torch.tensor([3, 2]),
    )
    loss.backward()
    assert torch.isfinite(loss) and {"loss_att", "loss_ctc", "acc"} <= set(stats)
    assert model.frontend.res_encoder.frontend3D[0].weight.grad.abs().sum() > 0


def decode(corpus, exp, data, out, **options):
    cmd = [
        "--data_path_and_name_and_type",
        f"{data / 'video.scp'},video,video",
        "--model_file",
        str(exp / "valid.loss.best.pth"),
        "--output_file",
        str(out),
        "--beam_size",
        "3",
        "--batch_size",
        "2",
    ]
    for name, value in options.items():
        cmd += [f"--{name}", str(value)]
    vsr_inference.main(cmd)
    return {
        key: text for key, _, text in (line.partition(" ") for line in out.read_text().splitlines())
    }


def training_options(corpus, tiny_run_options, exp):
    shape_args = [
        "--train_shape_file",
        str(corpus / "data" / "train" / "video.scp"),
        "--valid_shape_file",
        str(corpus / "data" / "test" / "video.scp"),
        "--batch_type",
        "unsorted",
    ]
    return (
        task_args(corpus)
        + data_args(corpus)
        + shape_args
        + tiny_run_options
        + ["--output_dir", str(exp)]
    )


def test_train_resume_and_beam_search(corpus, tiny_run_options):
    exp = corpus / "exp"
    common = training_options(corpus, tiny_run_options, exp)
    assert_trained_and_resumed(
        exp,
        lambda: LipReadingTask.main(cmd=common + ["--max_epoch", "1"]),
        lambda: LipReadingTask.main(cmd=common + ["--max_epoch", "20", "--resume", "true"]),
        final_epoch=20,
    )
    test = corpus / "data" / "test"
    references = dict(line.split() for line in (test / "text").read_text().splitlines())
    scores = corpus / "decode" / "score"
    predictions = decode(
        corpus, exp, test, corpus / "decode" / "text", ctc_weight=0.3, score_file=scores
    )
    assert list(predictions) == list(references)  # every id, in scp order (.npy and .mp4 alike)
    # --score_file: the 1-best's beam score and its length in tokens (characters here, + <eos>)
    for line, (key, text) in zip(scores.read_text().splitlines(), predictions.items(), strict=True):
        got_key, score, tokens = line.split()
        assert got_key == key and float(score) < 0 and int(tokens) == len(text) + 1
    exact = sum(predictions[k] == v for k, v in references.items())
    assert exact >= 6, (predictions, references)  # unseen videos are lip-read
    ctc_only = decode(corpus, exp, test, corpus / "decode_ctc" / "text", ctc_weight=1.0)
    assert sum(ctc_only[k] == v for k, v in references.items()) >= 6, ctc_only


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_beam_search_on_cuda_reads_what_it_reads_on_the_cpu(corpus, tiny_run_options):
    """``--gpu_inference true``'s path (``--device cuda``): the model, the videos and the joint CTC/attention
    beam search on the GPU give the CPU's hypotheses."""
    exp = corpus / "exp"
    LipReadingTask.main(cmd=training_options(corpus, tiny_run_options, exp) + ["--max_epoch", "2"])
    test = corpus / "data" / "test"
    on = {
        d: decode(corpus, exp, test, corpus / d / "text", ctc_weight=0.3, device=d)
        for d in ("cpu", "cuda")
    }
    assert on["cuda"] == on["cpu"] and len(on["cpu"]) > 0


def test_undecodable_video_stops_inference_and_leaves_no_output(corpus, tiny_run_options):
    exp = corpus / "exp"
    LipReadingTask.main(
        cmd=task_args(corpus)
        + data_args(corpus)
        + tiny_run_options
        + [
            "--output_dir",
            str(exp),
            "--max_epoch",
            "1",
            "--batch_type",
            "unsorted",
            "--train_shape_file",
            str(corpus / "data" / "train" / "video.scp"),
            "--valid_shape_file",
            str(corpus / "data" / "test" / "video.scp"),
        ]
    )
    test = corpus / "data" / "test"
    (corpus / "videos" / "t03.npy").write_bytes(b"\x93NUMPY broken")
    out = corpus / "decode" / "text"
    with pytest.raises(
        InputError, match=re.escape(f"{test / 'video.scp'}:4: key 't03': cannot decode video")
    ):
        decode(corpus, exp, test, out)
    assert not out.exists() and not list(out.parent.glob("*"))
