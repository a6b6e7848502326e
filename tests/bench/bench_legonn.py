#!/usr/bin/env python
"""Cost of the LegoNN machinery: a training step of a LegoNN MT model against a plain encoder-decoder.

    python tests/bench/bench_legonn.py [--quick] [--device cpu|cuda] [--batch_size B] [--rounds N]

Both models are ESPnet2 MT models built by the MT task from configs: the LegoNN one (``model: legonn``;
modality encoder + OLC upsampling by 2 as the second half of the encoder, CTC interface over the target
vocabulary, WEmb ingestor + pre-LN Transformer decoder) and ESPnet's plain Transformer encoder-decoder with
as many encoder blocks as brings its parameter count closest (the paper's "same size" baseline, §V-B).
A step = forward (CE, plus CTC for LegoNN) + backward + Adam, on B = 16 sentences of 30 tokens (--batch_size B).

Decoding: a composed three-module LegoNN ASR model (speech -> phonemes with OLC 1/1.2 -> words with a WEmb
RF 5 ingestor and OLC 1/3.5 -> WEmb decoder, §V-C2) against a one-module ESPnet ASR Transformer of matched
size, both decoded by ESPnet's ``BatchBeamSearch`` (beam 5) for exactly ``--steps`` output tokens (an
<eos> before that is not accepted, so random weights give both the same amount of work), one utterance.
The models alternate round-robin so machine load hits both alike; the fastest round of each is reported
(tests/bench/timing.py).
Targets: LegoNN / plain <= 1.5x for both (on CUDA too, at the same default batch: no GPU goal of its own).
"""

from __future__ import annotations

import argparse
from argparse import Namespace

import torch
from timing import device_options, fastest, pick_batch_size

TARGET = 1.5


def task_of(name: str):
    import espnet_ext.registry

    espnet_ext.registry.install()
    if name == "mt":
        from espnet2.tasks.mt import MTTask

        return MTTask
    from espnet2.tasks.asr import ASRTask

    return ASRTask


def common(vocab: list[str]) -> dict:
    config = task_of("mt").get_default_config()
    config.update(token_list=vocab, src_token_list=vocab, model_conf={"report_bleu": False})
    return config


def asr_common(vocab: list[str], feats: int) -> dict:
    config = task_of("asr").get_default_config()
    config.update(
        token_list=vocab,
        input_size=feats,
        frontend=None,
        specaug=None,
        normalize=None,
        model_conf={"report_cer": False, "report_wer": False, "ctc_weight": 0.0},
    )
    return config


def legonn_asr_config(vocab, phones, feats, dim, heads, units) -> dict:
    config = asr_common(vocab, feats)
    layer = dict(output_size=dim, attention_heads=heads, linear_units=units)
    ingestor = dict(num_blocks=1, attention_heads=heads, linear_units=units)
    modules = [
        dict(
            layer,
            token_list=phones,
            input_layer="conv2d",
            num_blocks=6,
            olc=dict(ratio=1 / 1.2, max_length=365, num_blocks=2),
        ),
        dict(
            layer,
            token_list=vocab,
            input_layer="wemb",
            num_blocks=3,
            ingestor=dict(ingestor, receptive_field=5),
            olc=dict(ratio=1 / 3.5, max_length=130, num_blocks=2),
        ),
    ]
    config.update(
        model="legonn",
        encoder="legonn",
        decoder="legonn",
        encoder_conf=dict(modules=modules),
        decoder_conf=dict(
            attention_dim=dim,
            attention_heads=heads,
            linear_units=units,
            num_blocks=6,
            ingestor=dict(ingestor, type="wemb"),
        ),
        model_conf=dict(report_cer=False, report_wer=False, interface_text_keys=["phn", "text"]),
    )
    return config


def plain_asr_config(vocab, feats, dim, heads, units, decoder_blocks, encoder_blocks) -> dict:
    config = asr_common(vocab, feats)
    config.update(
        model="espnet",
        encoder="transformer",
        decoder="transformer",
        encoder_conf=dict(
            output_size=dim,
            attention_heads=heads,
            linear_units=units,
            num_blocks=encoder_blocks,
            input_layer="conv2d",
        ),
        decoder_conf=dict(attention_heads=heads, linear_units=units, num_blocks=decoder_blocks),
    )
    return config


def legonn_config(vocab, dim, heads, units, blocks) -> dict:
    config = common(vocab)
    module = dict(
        token_list=vocab,
        output_size=dim,
        attention_heads=heads,
        linear_units=units,
        num_blocks=blocks // 2,
        olc=dict(ratio=2.0, max_length=256, num_blocks=blocks - blocks // 2),
    )
    ingestor = dict(type="wemb", num_blocks=3, attention_heads=heads, linear_units=units)
    config.update(
        model="legonn",
        encoder="legonn",
        decoder="legonn",
        frontend_conf=dict(embed_dim=dim),
        encoder_conf=dict(modules=[module]),
        decoder_conf=dict(
            attention_dim=dim,
            attention_heads=heads,
            linear_units=units,
            num_blocks=blocks // 2,
            ingestor=ingestor,
        ),
        model_conf=dict(report_bleu=False, on_short_ctc="report"),
    )
    return config


def plain_config(vocab, dim, heads, units, decoder_blocks, encoder_blocks) -> dict:
    config = common(vocab)
    layer = dict(output_size=dim, attention_heads=heads, linear_units=units)
    config.update(
        model="mt",
        encoder="transformer",
        decoder="transformer",
        frontend_conf=dict(embed_dim=dim),
        encoder_conf=dict(layer, num_blocks=encoder_blocks, input_layer=None),
        decoder_conf=dict(attention_heads=heads, linear_units=units, num_blocks=decoder_blocks),
    )
    return config


def build(config, task="mt"):
    torch.manual_seed(0)
    return task_of(task).build_model(Namespace(**config))


def n_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def same_size_plain(target: int, make_config, decoder_blocks, task="mt"):
    """The plain model whose encoder depth brings its parameter count closest to ``target``."""
    best = None
    for encoder_blocks in range(1, 6 * decoder_blocks + 1):
        model = build(make_config(encoder_blocks), task)
        gap = abs(n_params(model) - target)
        if best is None or gap < best[0]:
            best = (gap, encoder_blocks, model)
        if n_params(model) >= target:  # deeper ones only grow
            break
    return best[1], best[2]


def train_step(model, optimizer, batch) -> None:
    loss, _, _ = model(**batch)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--quick", action="store_true", help="small model and batch (smoke run)")
    device_options(parser, 16, 16)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--steps", type=int, default=None, help="decoded tokens (default 20)")
    args = parser.parse_args()
    dim, heads, units, blocks, n_vocab, batch_size, length = (
        (32, 2, 64, 4, 50, 4, 8) if args.quick else (256, 4, 1024, 12, 1000, 16, 30)
    )
    batch_size = pick_batch_size(args, batch_size, batch_size)
    rounds = args.rounds or (2 if args.quick else 10)
    torch.set_num_threads(1)
    vocab = ["<blank>", "<unk>", *[f"t{i}" for i in range(n_vocab - 3)], "<sos/eos>"]
    lego = build(legonn_config(vocab, dim, heads, units, blocks))
    depth, plain = same_size_plain(
        n_params(lego),
        lambda depth: plain_config(vocab, dim, heads, units, blocks // 2, depth),
        blocks // 2,
    )
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(2, n_vocab - 1, (batch_size, length), generator=g)
    lengths = torch.full((batch_size,), length)
    batch = dict(text=tokens, text_lengths=lengths, src_text=tokens, src_text_lengths=lengths)
    batch = {k: v.to(args.device) for k, v in batch.items()}
    models = {"plain encoder-decoder": plain, "LegoNN (OLC x2, WEmb)": lego}
    steps = {}
    for name, model in models.items():
        optimizer = torch.optim.Adam(model.to(args.device).train().parameters(), lr=1e-4)
        steps[name] = lambda m=model, o=optimizer: train_step(m, o, batch)
    times = fastest(steps, rounds, args.device)
    base = times["plain encoder-decoder"]
    print(f"device={args.device} threads=1 batch={batch_size}x{length} d={dim} rounds={rounds}")
    print(f"plain encoder blocks matched to LegoNN size: {depth}")
    print(f"{'model':28s} {'params':>10s} {'step ms':>9s} {'ratio':>6s}")
    for name, model in models.items():
        ratio = times[name] / base
        print(f"{name:28s} {n_params(model):10d} {1000 * times[name]:9.1f} {ratio:6.3f}")
    lego_ratio = times["LegoNN (OLC x2, WEmb)"] / base
    verdict = "within" if lego_ratio <= TARGET else "ABOVE"
    print(f"LegoNN / plain = {lego_ratio:.3f}: {verdict} the {TARGET}x target")
    decoding(args, rounds, dim, heads, units, n_vocab)


def beam_search(model):
    from espnet.nets.batch_beam_search import BatchBeamSearch

    return BatchBeamSearch(
        scorers={"decoder": model.decoder},
        weights={"decoder": 1.0},
        beam_size=5,
        vocab_size=model.vocab_size,
        sos=model.sos,
        eos=model.eos,
    )


def beam_decode(model, search, speech, steps: int) -> None:
    with torch.no_grad():
        memory, _ = model.encode(speech[None], torch.tensor([speech.size(0)], device=speech.device))
        search(memory[0], maxlenratio=-steps, minlenratio=-(steps - 1))


def decoding(args, rounds, dim, heads, units, n_vocab):
    feats, frames = 80, (100 if args.quick else 400)
    steps = args.steps or (3 if args.quick else 20)
    vocab = ["<blank>", "<unk>", *[f"t{i}" for i in range(n_vocab - 3)], "<sos/eos>"]
    phones = ["<blank>", "<unk>", *[f"p{i}" for i in range(40)]]
    lego = build(legonn_asr_config(vocab, phones, feats, dim, heads, units), "asr").eval()
    depth, plain = same_size_plain(
        n_params(lego),
        lambda depth: plain_asr_config(vocab, feats, dim, heads, units, 6, depth),
        6,
        "asr",
    )
    models = {"plain ASR Transformer": plain.eval(), "LegoNN 3 modules (ASR)": lego}
    speech = torch.randn(frames, feats, generator=torch.Generator().manual_seed(0))
    speech = speech.to(args.device)
    decodes = {}
    for name, model in models.items():
        search = beam_search(model.to(args.device))
        decodes[name] = lambda m=model, s=search: beam_decode(m, s, speech, steps)
    times = fastest(decodes, rounds, args.device)
    base = times["plain ASR Transformer"]
    print(f"\ndecoding: {frames} frames, beam 5, {steps} tokens; plain encoder blocks: {depth}")
    print(f"{'model':28s} {'params':>10s} {'decode ms':>9s} {'ratio':>6s}")
    for name, model in models.items():
        ratio = times[name] / base
        print(f"{name:28s} {n_params(model):10d} {1000 * times[name]:9.1f} {ratio:6.3f}")
    ratio = times["LegoNN 3 modules (ASR)"] / base
    verdict = "within" if ratio <= TARGET else "ABOVE"
    print(f"LegoNN ASR decoding / plain = {ratio:.3f}: {verdict} the {TARGET}x target")


if __name__ == "__main__":
    main()
