"""Head-selection encoders/decoders against ESPnet's, and the ASR model that feeds them task ids."""

import math

import pytest
import torch
import yaml
from compiled_check import eager_and_compiled, graph_breaks, graphs, same_step
from espnet2.asr.ctc import CTC
from espnet2.asr.decoder.transformer_decoder import TransformerDecoder
from espnet2.asr.encoder.transformer_encoder import TransformerEncoder
from espnet2.torch_utils.recursive_op import recursive_average

from espnet_ext.attention import head_selection
from espnet_ext.attention.head_selection import HeadSelectionAttention, set_task_id
from espnet_ext.errors import ConfigError, InputError
from espnet_ext.nets.head_selection_transformer import (
    HeadSelectionTransformerDecoder,
    HeadSelectionTransformerEncoder,
)
from espnet_ext.nets.task_models import (
    TaskConditionedASRModel,
    TaskConditionedMTModel,
    TaskConditionedSTModel,
)
from espnet_ext.registry import build_model

FEATS, VOCAB = 5, 7
SMALL = dict(output_size=8, attention_heads=2, linear_units=16, dropout_rate=0.0)
ENC = dict(SMALL, num_blocks=3, input_layer="linear")
DEC = dict(
    attention_heads=2,
    linear_units=16,
    num_blocks=2,
    dropout_rate=0.0,
    self_attention_dropout_rate=0.0,
)


def encoder(seed=0, **options):
    torch.manual_seed(seed)
    return HeadSelectionTransformerEncoder(FEATS, **ENC, **options)


def decoder(seed=0, **options):
    torch.manual_seed(seed)
    return HeadSelectionTransformerDecoder(VOCAB, 8, **DEC, **options)


def logits_of(module):
    return [m.selection_logits for m in module.modules() if isinstance(m, HeadSelectionAttention)]


def test_extra_parameters_are_tasks_x_candidates_x_layers():
    enc = encoder(num_tasks=3, head_candidates=8)
    assert sum(p.numel() for p in logits_of(enc)) == 3 * 8 * 3
    dec = decoder(num_tasks=5, head_candidates=4, selection_strategy="subset")
    assert sum(p.numel() for p in logits_of(dec)) == 5 * 4 * 2
    # with H' = H the model is ESPnet's plus the T x H' x L logits, nothing else
    same = encoder(num_tasks=3, head_candidates=2)
    plain = TransformerEncoder(FEATS, **ENC)
    extra = sum(p.numel() for p in same.parameters()) - sum(p.numel() for p in plain.parameters())
    assert extra == 3 * 2 * 3
    # H' > H: the H' - H extra heads' q/k/v rows (weights and biases) add 3 (H' - H) d_k (d + 1) per layer
    wide = encoder(num_tasks=3, head_candidates=6)
    extra = sum(p.numel() for p in wide.parameters()) - sum(p.numel() for p in plain.parameters())
    d, d_k = ENC["output_size"], ENC["output_size"] // ENC["attention_heads"]
    assert extra == 3 * (3 * (6 - 2) * d_k * (d + 1)) + 3 * 6 * 3


def test_inference_noise_option_reaches_every_layer():
    noisy = decoder(num_tasks=2, head_candidates=4, selection_inference_noise=True)
    assert all(m.inference_noise for m in noisy.modules() if isinstance(m, HeadSelectionAttention))
    plain = encoder(num_tasks=2, head_candidates=4)
    assert not any(
        m.inference_noise for m in plain.modules() if isinstance(m, HeadSelectionAttention)
    )


@pytest.mark.parametrize("side", ["encoder", "decoder"])
def test_straight_through_path_alone_trains_the_logits(side):
    """The task loss alone (no KL) reaches φ of every layer through s + q - stop_grad(q)."""
    x, lengths = torch.randn(2, 6, FEATS), torch.tensor([6, 4])
    if side == "encoder":
        module = encoder(num_tasks=3, head_candidates=4).train()
        set_task_id(module, torch.tensor([2, 0]))
        out = module(x, lengths)[0]
    else:
        module = decoder(num_tasks=3, head_candidates=4).train()
        set_task_id(module, torch.tensor([2, 0]))
        memory = torch.randn(2, 6, 8)
        ys, ylens = torch.randint(0, VOCAB, (2, 4)), torch.tensor([4, 3])
        out = module(memory, lengths, ys, ylens)[0]
    out.sum().backward()
    for logits in logits_of(module):
        assert logits.grad[[0, 2]].abs().sum(-1).gt(0).all()  # every layer, both tasks
        assert logits.grad[1].eq(0).all()  # a task not in the batch


def test_all_heads_equal_espnet_encoder_and_decoder():
    enc = encoder(num_tasks=2, head_candidates=2).eval()
    plain = TransformerEncoder(FEATS, **ENC).eval()
    assert plain.load_state_dict(enc.state_dict(), strict=False).unexpected_keys
    x, lengths = torch.randn(2, 6, FEATS), torch.tensor([6, 4])
    set_task_id(enc, torch.tensor([1, 0]))
    ours, ref = enc(x, lengths)[0], plain(x, lengths)[0]
    torch.testing.assert_close(ours[1, :4], ref[1, :4])
    torch.testing.assert_close(ours[0], ref[0])

    dec = decoder(num_tasks=2, head_candidates=2).eval()
    plain_dec = TransformerDecoder(VOCAB, 8, **DEC).eval()
    plain_dec.load_state_dict(dec.state_dict(), strict=False)
    ys, ylens = torch.randint(0, VOCAB, (2, 4)), torch.tensor([4, 3])
    set_task_id(dec, torch.tensor([0, 1]))
    torch.testing.assert_close(
        dec(ref, lengths, ys, ylens)[0], plain_dec(ref, lengths, ys, ylens)[0]
    )


def test_mixed_batch_encoder_equals_each_utterance_alone():
    enc = encoder(num_tasks=3, head_candidates=6).eval()
    for p in logits_of(enc):
        torch.nn.init.normal_(p)
    x, lengths, tasks = torch.randn(3, 6, FEATS), [6, 3, 5], [2, 0, 1]
    set_task_id(enc, torch.tensor(tasks))
    mixed = enc(x, torch.tensor(lengths))[0]
    for i, (n, t) in enumerate(zip(lengths, tasks)):
        set_task_id(enc, torch.tensor([t]))
        torch.testing.assert_close(mixed[i, :n], enc(x[i : i + 1, :n], torch.tensor([n]))[0][0])


def test_incremental_decoding_matches_the_full_forward():
    dec = decoder(num_tasks=2, head_candidates=4, selection_strategy="subset").eval()
    for p in logits_of(dec):
        torch.nn.init.normal_(p)
    memory, ys = torch.randn(1, 5, 8), torch.randint(0, VOCAB, (1, 4))
    set_task_id(dec, torch.tensor([1]))  # one id serves every hypothesis
    full = dec(memory, torch.tensor([5]), ys, torch.tensor([4]))[0].log_softmax(-1)
    state = None
    for step in range(1, 5):
        logp, state = dec.score(ys[0, :step], state, memory[0])
        torch.testing.assert_close(logp, full[0, step - 1], atol=1e-5, rtol=1e-5)


def test_bad_configuration_is_refused_before_building():
    with pytest.raises(ConfigError, match="head_candidates"):
        encoder(num_tasks=2, head_candidates=5)  # 5 is no multiple of H = 2
    with pytest.raises(ConfigError, match="selection_strategy"):
        decoder(selection_strategy="all")


def asr_model(**options):
    torch.manual_seed(0)
    tokens = ["<blank>", "<unk>", "a", "b", "c", "d", "<sos/eos>"]
    return TaskConditionedASRModel(
        vocab_size=VOCAB,
        token_list=tokens,
        frontend=None,
        specaug=None,
        normalize=None,
        preencoder=None,
        encoder=encoder(num_tasks=2, head_candidates=4),
        postencoder=None,
        decoder=decoder(num_tasks=3, head_candidates=4, selection_strategy="subset"),
        ctc=CTC(VOCAB, 8),
        joint_network=None,
        report_cer=False,
        report_wer=False,
        **options,
    )


def test_asr_model_routes_task_ids_and_adds_the_kl():
    model = asr_model(selection_kl_weight=0.5)
    batch = dict(
        speech=torch.randn(2, 6, FEATS),
        speech_lengths=torch.tensor([6, 5]),
        text=torch.tensor([[2, 3, 4], [5, 2, -1]]),
        text_lengths=torch.tensor([3, 2]),
    )
    with torch.no_grad():
        for p in logits_of(model.decoder):
            p.zero_()  # q = 1/2 = the prior: no KL
        for p in logits_of(model.encoder):
            p.zero_()
            p[1] = math.log(3.0)  # q = 3/4 against the prior 2/4
    per_head = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    # source language for the encoder, target language for the decoder (an unseen pair is fine)
    ids = dict(encoder_task_id=torch.tensor([[1], [0]]), decoder_task_id=torch.tensor([2, 2]))
    torch.manual_seed(1)
    loss, stats, weight = model(**batch, **ids)
    # the task-1 utterance: per_head in every encoder layer (mean over layers and heads), 4 target
    # tokens with <eos>; 0 for the task-0 one and the decoder; per utterance (length_normalized_loss false)
    assert float(stats["selection_kl"]) == pytest.approx(4 * per_head / 2, rel=1e-5)
    # what ESPnet's trainer does with the statistics on several GPUs (it asserts the weight's shape)
    averaged, _ = recursive_average(stats, weight)
    assert float(averaged["selection_kl"]) == pytest.approx(4 * per_head / 2, rel=1e-5)
    model.selection_kl_weight = 0.0
    torch.manual_seed(1)  # the same Gumbel draws
    without_kl = model(**batch, **ids)[0]
    assert float((loss - without_kl).detach()) == pytest.approx(0.5 * 2 * per_head, rel=1e-4)
    loss.backward()
    enc_grads = [p.grad for p in logits_of(model.encoder)]
    dec_grads = [p.grad for p in logits_of(model.decoder)]
    assert all(g[:2].abs().sum() > 0 for g in enc_grads)
    assert all(g[2].abs().sum() > 0 and g[:2].eq(0).all() for g in dec_grads)
    with pytest.raises(InputError, match="task_id"):
        model(**batch)
    with pytest.raises(InputError, match="task id 2 unknown"):
        model(**batch, task_id=torch.tensor([0, 2]))  # the encoder knows tasks 0 and 1 only


def authors_kl(model, enc_tasks, dec_tasks, tokens, per_token):
    """fairseq's HeadSelectionLoss by hand (examples/attention_head_selection/src/loss/
    attention_head_selection.py): per side a (tasks, layers, heads) table, each task's KL averaged over
    layers x heads, weighted by the task's target tokens in the batch (get_sample_sizes), the sides
    added; fairseq divides the summed loss by the batch's tokens, ESPnet by them or by the utterances."""
    total = 0.0
    for side, tasks in (("encoder", enc_tasks), ("decoder", dec_tasks)):
        layers = [
            m for m in getattr(model, side).modules() if isinstance(m, HeadSelectionAttention)
        ]
        table = torch.stack([m.selection_logits.detach() for m in layers], 1)  # (T, L, H')
        q = torch.sigmoid(table).double()
        p = layers[0].prior
        kl = q * torch.log(q / p) + (1 - q) * torch.log((1 - q) / (1 - p))
        per_task = kl.sum(-1).sum(-1) / (table.numel() / table.size(0))
        sizes = torch.zeros(table.size(0), dtype=torch.double)
        for t, n in zip(tasks, tokens):
            sizes[t] += n
        total += float(per_task @ sizes)
    return total / (sum(tokens) if per_token else len(tokens))


@pytest.mark.parametrize("per_token", [False, True])
def test_selection_kl_is_normalised_as_the_authors(per_token):
    model = asr_model(selection_kl_weight=1.0, length_normalized_loss=per_token)
    with torch.no_grad():
        for p in logits_of(model):
            p.normal_(0.0, 1.5)
    text = torch.tensor([[2, 3, 4, 5], [5, 2, -1, -1], [3, -1, -1, -1]])
    lengths = torch.tensor([4, 2, 1])
    enc, dec = [1, 0, 1], [2, 0, 1]
    _, stats, _ = model(
        speech=torch.randn(3, 6, FEATS),
        speech_lengths=torch.tensor([6, 5, 6]),
        text=text,
        text_lengths=lengths,
        encoder_task_id=torch.tensor(enc),
        decoder_task_id=torch.tensor(dec),
    )
    want = authors_kl(model, enc, dec, (lengths + 1).tolist(), per_token)  # targets end with <eos>
    assert float(stats["selection_kl"]) == pytest.approx(want, rel=1e-5)


def test_asr_and_mt_tasks_build_task_conditioned_models(tmp_path):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("\n".join(["<blank>", "<unk>", "a", "b", "c", "d", "<sos/eos>"]) + "\n")
    selection = {"num_tasks": 2, "head_candidates": 4, "selection_strategy": "group"}
    config = {
        "model": "task_conditioned",
        "model_conf": {"ctc_weight": 0.3, "selection_kl_weight": 0.1},
        "frontend": None,
        "encoder": "head_selection_transformer",
        "encoder_conf": dict(ENC, **selection),
        "decoder": "transformer",  # selection in the encoder only (Table 6)
        "decoder_conf": {k: v for k, v in DEC.items() if k != "self_attention_dropout_rate"},
    }
    path = tmp_path / "asr.yaml"
    path.write_text(yaml.safe_dump(config))
    common = ["--config", str(path), "--token_list", str(tokens), "--token_type", "char"]
    model = build_model("asr", common + ["--input_size", str(FEATS)])
    assert isinstance(model, TaskConditionedASRModel)
    assert len(logits_of(model)) == 3
    loss, stats, _ = model(
        speech=torch.randn(2, 6, FEATS),
        speech_lengths=torch.tensor([6, 5]),
        text=torch.tensor([[2, 3], [4, -1]]),
        text_lengths=torch.tensor([2, 1]),
        task_id=torch.tensor([[1], [0]]),
        task_id_lengths=torch.tensor([1, 1]),  # as ESPnet's loader delivers an int data name
    )
    assert torch.isfinite(loss) and "selection_kl" in stats

    config.update(
        frontend="embed",
        frontend_conf={"embed_dim": 8, "positional_dropout_rate": 0.0},
        encoder_conf=dict(ENC, input_layer=None, **selection),
        decoder="head_selection_transformer",
        decoder_conf=dict(DEC, **selection),
        model_conf={"selection_kl_weight": 0.1},
    )
    path.write_text(yaml.safe_dump(config))
    mt_args = common + ["--src_token_list", str(tokens), "--src_token_type", "char"]
    model = build_model("mt", mt_args)
    assert isinstance(model, TaskConditionedMTModel) and len(logits_of(model)) == 5
    loss, _, _ = model(
        text=torch.tensor([[2, 3, 4]]),
        text_lengths=torch.tensor([3]),
        src_text=torch.tensor([[5, 4, 3, 2]]),
        src_text_lengths=torch.tensor([4]),
        task_id=torch.tensor([1]),
    )
    loss.backward()
    assert all(p.grad[1].abs().sum() > 0 for p in logits_of(model))


def test_st_model_selects_heads_per_target_language():
    torch.manual_seed(0)
    tokens = ["<blank>", "<unk>", "a", "b", "c", "d", "<sos/eos>"]
    model = TaskConditionedSTModel(
        vocab_size=VOCAB,
        token_list=tokens,
        frontend=None,
        specaug=None,
        normalize=None,
        preencoder=None,
        encoder=encoder(num_tasks=2, head_candidates=4),
        hier_encoder=None,
        md_encoder=None,
        extra_mt_encoder=None,
        postencoder=None,
        decoder=decoder(num_tasks=2, head_candidates=4),
        extra_asr_decoder=None,
        extra_mt_decoder=None,
        ctc=None,
        st_ctc=None,
        st_joint_network=None,
        src_vocab_size=VOCAB,
        src_token_list=tokens,
        report_bleu=False,
    )
    loss, stats, _ = model(
        speech=torch.randn(2, 6, FEATS),
        speech_lengths=torch.tensor([6, 5]),
        text=torch.tensor([[2, 3], [4, -1]]),
        text_lengths=torch.tensor([2, 1]),
        task_id=torch.tensor([1, 1]),
    )
    loss.backward()
    assert "selection_kl" in stats
    assert all(p.grad[1].abs().sum() > 0 and p.grad[0].eq(0).all() for p in logits_of(model))


def test_s2t_encoders_are_the_s2t_transformer_plus_selection_or_adapters():
    from espnet_ext.nets.adapters import AdapterS2TTransformerEncoder
    from espnet_ext.nets.head_selection_transformer import HeadSelectionS2TTransformerEncoder
    from espnet_ext.nets.multiformer_encoder import S2TTransformerEncoder

    conf = dict(SMALL, num_blocks=3, conv_channels=8)
    plain = S2TTransformerEncoder(FEATS, **conf).eval()
    n_plain = sum(p.numel() for p in plain.parameters())
    selecting = HeadSelectionS2TTransformerEncoder(FEATS, num_tasks=3, head_candidates=2, **conf)
    assert sum(p.numel() for p in selecting.parameters()) - n_plain == 3 * 2 * 3
    x, lengths = torch.randn(2, 12, FEATS), torch.tensor([12, 12])
    plain.load_state_dict(selecting.state_dict(), strict=False)
    set_task_id(selecting.eval(), torch.tensor([2, 0]))
    torch.testing.assert_close(selecting(x, lengths)[0], plain(x, lengths)[0])
    adapted = AdapterS2TTransformerEncoder(FEATS, num_tasks=2, adapter_dim=4, **conf).eval()
    plain.load_state_dict(adapted.state_dict(), strict=False)
    set_task_id(adapted, torch.tensor([1, 0]))
    torch.testing.assert_close(adapted(x, lengths)[0], plain(x, lengths)[0])  # adapters start at 0


def test_model_sets_the_kl_form_of_every_layer():
    model = asr_model(selection_kl_form="authors")
    forms = {m.kl_form for m in model.modules() if isinstance(m, HeadSelectionAttention)}
    assert forms == {"authors"}
    loss, stats, _ = model(
        speech=torch.randn(2, 6, FEATS),
        speech_lengths=torch.tensor([6, 5]),
        text=torch.tensor([[2, 3], [4, -1]]),
        text_lengths=torch.tensor([2, 1]),
        encoder_task_id=torch.tensor([1, 0]),
        decoder_task_id=torch.tensor([2, 2]),
    )
    assert torch.isfinite(stats["selection_kl"])
    with pytest.raises(ConfigError, match="selection_kl_form"):
        asr_model(selection_kl_form="reverse")


@pytest.mark.parametrize("kl_form", ["bernoulli", "authors"])
@pytest.mark.parametrize("task_id", [[2, 0, 1], [1]])
def test_layers_drawn_together_equal_layers_drawing_one_by_one(task_id, kl_form, monkeypatch):
    """The encoder's forward draws every layer's selection at once (draw_together): the same noise in
    the same order as each layer drawing its own, so the same outputs, KL terms and gradients to the
    input, the weights and every layer's logits; one draw. (The noise from a generator of its own: ESPnet's
    MultiSequential draws its layer-drop numbers from the global one between the two orders.)"""
    enc = encoder(num_tasks=3, head_candidates=4, gumbel_temperature=2.0).train()
    for m in enc.modules():
        if isinstance(m, HeadSelectionAttention):
            m.kl_form = kl_form
    x, lengths = torch.randn(3, 6, FEATS), torch.tensor([6, 4, 5])
    draws = []
    draw = HeadSelectionAttention.draw
    monkeypatch.setattr(
        HeadSelectionAttention,
        "draw",
        lambda self, logits: draws.append(logits.shape) or draw(self, logits),
    )
    noise = torch.Generator()
    gumbel = lambda shape, like: -torch.log(-torch.log(torch.rand(shape, generator=noise)))  # noqa: E731
    monkeypatch.setattr(head_selection, "sample_gumbel", gumbel)
    results = []
    for forward in (
        enc.forward,
        lambda *a: TransformerEncoder.forward(enc, *a),
    ):  # together, one by one
        enc.zero_grad()
        inputs = x.clone().requires_grad_()
        set_task_id(enc, torch.tensor(task_id))
        noise.manual_seed(4), torch.manual_seed(5)  # the noise; dropout and layer drop
        out = forward(inputs, lengths)[0]
        kl = torch.stack(
            [m.selection_kl for m in enc.modules() if isinstance(m, HeadSelectionAttention)]
        )
        (out.sum() + kl.sum()).backward()
        results.append(
            (out.detach(), kl.detach(), [inputs.grad] + [p.grad.clone() for p in enc.parameters()])
        )
    tasks = 1 if len(task_id) == 1 else 3
    assert draws == [(3, tasks, 4)] + [(tasks, 4)] * 3  # all layers at once, then layer by layer
    (out, kl, grads), (expected_out, expected_kl, expected_grads) = results
    torch.testing.assert_close(out, expected_out)
    torch.testing.assert_close(kl, expected_kl)
    assert kl.shape == (3, 3) and kl.abs().sum() > 0
    for got, expected in zip(grads, expected_grads):
        torch.testing.assert_close(got, expected)
    assert all(m.drawn is None for m in enc.modules() if isinstance(m, HeadSelectionAttention))


def test_layers_drawn_together_get_one_tasks_projection_rows_from_one_gather():
    """draw_together hands each layer its selected heads' q, k and v rows of one task, gathered from
    every layer's weights at once: what each layer's own rows of its own weights are. (Ids per row: each
    layer gathers its rows' weights itself; the rows themselves are drawn together.)"""
    enc = encoder(num_tasks=3, head_candidates=4).train()
    layers = [layer.self_attn for layer in enc.encoders]
    gathers = []
    index_select = torch.Tensor.index_select
    drawn = {}
    for task_id in ([1], [2, 0, 1]):
        set_task_id(enc, torch.tensor(task_id))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(
                torch.Tensor,
                "index_select",
                lambda t, *a: gathers.append(t.shape) or index_select(t, *a),
            )
            with head_selection.draw_together(layers):
                drawn[len(task_id)] = [layer.drawn for layer in layers]
    weight_gathers = [shape for shape in gathers if len(shape) == 2 and shape[1] == 8]
    assert weight_gathers == [(len(layers) * 3 * 4 * 4, 8)]  # L x (q, k, v) x H' x d_k rows of d
    for layer, (heads, _, _, _, rows, (weight, bias)) in zip(layers, drawn[1]):
        assert rows is None and heads.shape == (1, 2)
        rows = layer.qkv_rows(heads)[0]
        assert torch.equal(weight, torch.cat([lin.weight for lin in layer.qkv])[rows])
        assert torch.equal(bias, torch.cat([lin.bias for lin in layer.qkv])[rows])
    for layer, (heads, _, _, _, rows, projection) in zip(layers, drawn[3]):
        assert projection is None and torch.equal(rows, layer.qkv_rows(heads))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_compiled_s2t_layers_equal_the_eager_encoder_on_mixed_and_one_task_batches(device):
    # the mTEDx encoder (head_selection_s2t_transformer) with compile_layers: one graph for its layers
    # whatever the tasks of a batch; the Gumbel draw is the encoder's, outside the compiled layers
    from espnet_ext.nets.head_selection_transformer import HeadSelectionS2TTransformerEncoder

    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    options = dict(SMALL, num_blocks=2, conv_channels=16, num_tasks=4, head_candidates=4)
    options.update(attention_dropout_rate=0.0, positional_dropout_rate=0.0, gumbel_temperature=5.0)
    eager, compiled = eager_and_compiled(
        lambda **extra: HeadSelectionS2TTransformerEncoder(FEATS, **options, **extra).train(),
        device,
    )

    def run(model, xs, lengths, tasks):
        set_task_id(model, tasks)
        return model(xs, lengths)[0]

    for frames, tasks in [(42, [0, 3, 3]), (34, [1, 1, 1])]:  # 11 and 9 frames: not d (8)
        xs = torch.randn(3, frames, FEATS, device=device)
        lengths = torch.tensor([frames, frames - 5, frames // 2], device=device)
        tasks = torch.tensor(tasks, device=device)
        same_step(eager, compiled, run, xs, lengths, tasks, seed=1)  # the same Gumbel noise
    assert graph_breaks() == {} and graphs() == 1
