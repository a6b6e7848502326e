"""Task tags at decoding (our asr/mt/st inference entry points, run in-process) and task-conditioned ST models
(our ST task, espnet_ext.tasks.st)."""

import numpy as np
import pytest
import torch
import yaml
from espnet2.bin import asr_inference
from espnet2.tasks.asr import ASRTask
from espnet2.tasks.mt import MTTask

from espnet_ext.attention.head_selection import HeadSelectionAttention
from espnet_ext.bin.asr_inference import main as asr_decode
from espnet_ext.bin.mt_inference import main as mt_decode
from espnet_ext.bin.st_inference import main as st_decode
from espnet_ext.data.task_tags import main as task_tags_main
from espnet_ext.data.task_tags import task_ids
from espnet_ext.errors import ConfigError, InputError
from espnet_ext.nets.task_models import TaskConditionedModel, TaskConditionedSTModel
from espnet_ext.registry import install
from espnet_ext.tasks import task_conditioned
from espnet_ext.tasks.st import STTask

install()  # registration, as in the entry points

TOKENS = ["<blank>", "<unk>", "a", "b", "c", "<sos/eos>"]
TAGS = ["es", "de", "fr"]
FEATS = 4
SMALL = dict(output_size=8, attention_heads=2, linear_units=16, num_blocks=2, dropout_rate=0.0)
SELECTION = dict(num_tasks=3, head_candidates=4, selection_strategy="group")
DECODER = dict(attention_heads=2, linear_units=16, num_blocks=2, dropout_rate=0.0)


def save_model(tmp_path, task_cls, config: dict, extra_args: list[str]):
    """Config and weights the way ESPnet's trainer leaves them in an experiment dir."""
    (tmp_path / "tokens.txt").write_text("\n".join(TOKENS) + "\n")
    conf = tmp_path / "train.yaml"
    conf.write_text(yaml.safe_dump(config))
    args = task_cls.get_parser().parse_args(
        ["--config", str(conf), "--token_list", str(tmp_path / "tokens.txt")] + extra_args
    )
    torch.manual_seed(0)
    model = task_cls.build_model(args)
    with torch.no_grad():  # each task prefers other heads: heads (0|1, 2|3) per group
        for m in model.modules():
            if isinstance(m, HeadSelectionAttention):
                m.selection_logits.copy_(torch.tensor([[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 0, 1.0]]))
    exp = tmp_path / "exp"
    exp.mkdir()
    args.token_list = TOKENS
    (exp / "config.yaml").write_text(yaml.safe_dump(vars(args)))
    torch.save(model.state_dict(), exp / "model.pth")
    return exp


EXPECTED_HEADS = {0: [0, 2], 1: [1, 3], 2: [0, 3]}


@pytest.fixture
def spy(monkeypatch):
    """Records, in order, each utterance's task ids and, at every layer call, the heads of the tasks the
    layer was given (its selection: in eval the layer attends with exactly these,
    tests/attention/test_head_selection.py pins its gathered path against the general one)."""
    events = []
    set_task_id, forward = TaskConditionedModel.set_task_id, HeadSelectionAttention.forward
    selections = HeadSelectionAttention.selections

    def recording_set_task_id(
        self, task_id=None, encoder_task_id=None, decoder_task_id=None, target_language_id=None
    ):
        events.append(("utt", task_id, encoder_task_id, decoder_task_id))
        if target_language_id is not None:
            events.append(("language", int(target_language_id.reshape(-1)[0])))
        return set_task_id(self, task_id, encoder_task_id, decoder_task_id, target_language_id)

    def recording_forward(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        tasks = self.task_id.reshape(-1)
        heads, _ = selections(self, tasks)
        for task, chosen in zip(tasks.tolist(), heads.tolist()):
            events.append(("heads", task, chosen))
        return out

    monkeypatch.setattr(TaskConditionedModel, "set_task_id", recording_set_task_id)
    monkeypatch.setattr(HeadSelectionAttention, "forward", recording_forward)
    return events


def per_utterance(events):
    """[(task ids given, {tasks whose heads were computed}, all heads as expected?)] per utterance."""
    utterances = []
    for event in events:
        if event[0] == "utt":
            given = [None if x is None else int(x.reshape(-1)[0]) for x in event[1:]]
            utterances.append((given, set(), True))
        elif event[0] == "heads":
            given, tasks, ok = utterances[-1]
            tasks.add(event[1])
            utterances[-1] = (given, tasks, ok and event[2] == EXPECTED_HEADS[event[1]])
    return utterances


def speech_config(model_conf: dict) -> dict:
    """A task-conditioned speech model: head selection in the encoder and the decoder."""
    return {
        "model": "task_conditioned",
        "model_conf": model_conf,
        "frontend": None,
        "normalize": None,
        "encoder": "head_selection_transformer",
        "encoder_conf": dict(SMALL, input_layer="linear", **SELECTION),
        "decoder": "head_selection_transformer",
        "decoder_conf": dict(DECODER, **SELECTION),
    }


def asr_setup(tmp_path):
    config = speech_config({"ctc_weight": 0.3, "task_tags": TAGS})
    exp = save_model(
        tmp_path, ASRTask, config, ["--input_size", str(FEATS), "--token_type", "char"]
    )
    data = speech_data(tmp_path)
    return data, speech_decoding_args("asr", exp, data, tmp_path / "out")


def speech_decoding_args(task: str, exp, data, out) -> list[str]:
    """``<task>_inference`` options: the experiment's model, beam 2, on ``data``'s features."""
    return [
        "--ngpu", "0", "--batch_size", "1", "--beam_size", "2", "--maxlenratio", "0.5",
        "--data_path_and_name_and_type", f"{data}/feats.scp,speech,npy",
        f"--{task}_train_config", str(exp / "config.yaml"),
        f"--{task}_model_file", str(exp / "model.pth"),
        "--output_dir", str(out),
    ]  # fmt: skip


def speech_data(tmp_path):
    """data/test: four utterances of features, their task tags in ``lang``."""
    data = tmp_path / "data" / "test"
    data.mkdir(parents=True)
    rng = np.random.default_rng(0)
    scp = []
    for utt in ("u1", "u2", "u3", "u4"):
        np.save(data / f"{utt}.npy", rng.standard_normal((7, FEATS)).astype(np.float32))
        scp.append(f"{utt} {data / utt}.npy\n")
    (data / "feats.scp").write_text("".join(scp))
    (data / "lang").write_text("u1 de\nu2 fr\nu3 de\nu4 es\n")
    return data


def test_asr_decoding_uses_each_utterances_heads(tmp_path, spy):
    data, argv = asr_setup(tmp_path)
    asr_decode(argv + ["--task_tag_file", "lang"])
    utterances = per_utterance(spy)
    # u1 de, u2 fr, u3 de, u4 es -> ids 1 2 1 0 through the model's task_tags
    assert [u[0][0] for u in utterances] == [1, 2, 1, 0]
    assert [u[1] for u in utterances] == [{1}, {2}, {1}, {0}]
    assert all(u[2] for u in utterances)  # the heads of the utterance's task, in every layer
    hyps = (tmp_path / "out" / "1best_recog" / "text").read_text().split("\n")
    assert [h.split(" ")[0] for h in hyps if h] == ["u1", "u2", "u3", "u4"]
    # ESPnet's class is left as it was
    assert asr_inference.Speech2Text.__call__.__qualname__ == "Speech2Text.__call__"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_decoding_with_each_utterances_heads_on_cuda_reads_as_on_the_cpu(tmp_path):
    """``--gpu_inference true``'s path (ESPnet's ``--ngpu 1``): the task ids and head selections on the GPU
    give the CPU's hypotheses."""
    _, argv = asr_setup(tmp_path)
    hypotheses = {}
    for ngpu in ("0", "1"):
        out = tmp_path / f"out_ngpu{ngpu}"
        argv[argv.index("--ngpu") + 1], argv[argv.index("--output_dir") + 1] = ngpu, str(out)
        asr_decode(argv + ["--task_tag_file", "lang"])
        hypotheses[ngpu] = (out / "1best_recog" / "text").read_text()
    assert hypotheses["1"] == hypotheses["0"] and hypotheses["0"].count("\n") == 4


def test_decoding_refuses_unknown_tags_and_missing_tag_files(tmp_path, spy):
    data, argv = asr_setup(tmp_path)
    (data / "lang").write_text("u1 de\nu2 it\nu3 de\nu4 es\n")
    with pytest.raises(SystemExit, match=r"lang:2: key 'u2': task tag 'it' is unknown"):
        asr_decode(argv + ["--task_tag_file", "lang"])
    with pytest.raises(SystemExit, match=r"test/tags: no tag file"):
        asr_decode(argv + ["--task_tag_file", "tags"])
    (data / "lang").write_text("u1 de\nu2 fr\nu4 es\n")
    with pytest.raises(SystemExit, match=r"lang: no task tag for 1 utterance\(s\), e.g. 'u3'"):
        asr_decode(argv + ["--task_tag_file", "lang"])
    with pytest.raises(SystemExit, match="model_conf.task_tags.*task-conditioned"):
        asr_decode(argv)
    assert not spy and not (tmp_path / "out").exists()  # nothing decoded, nothing written


def test_mt_decoding_takes_encoder_and_decoder_tags_apart(tmp_path, spy):
    """M2O/O2M: source language in the encoder, target language in the decoder (zero-shot pairs too)."""
    config = {
        "model": "task_conditioned",
        "model_conf": {"task_tags": TAGS},
        "frontend": "embed",
        "frontend_conf": {"embed_dim": 8, "positional_dropout_rate": 0.0},
        "encoder": "head_selection_transformer",
        "encoder_conf": dict(SMALL, input_layer=None, **SELECTION),
        "decoder": "head_selection_transformer",
        "decoder_conf": dict(DECODER, **SELECTION),
    }
    common = ["--token_type", "char", "--src_token_type", "char"]
    exp = save_model(
        tmp_path, MTTask, config, common + ["--src_token_list", str(tmp_path / "tokens.txt")]
    )
    cfg = yaml.safe_load((exp / "config.yaml").read_text())
    cfg["src_token_list"] = TOKENS
    (exp / "config.yaml").write_text(yaml.safe_dump(cfg))
    data = tmp_path / "data" / "test"
    data.mkdir(parents=True)
    (data / "text.src").write_text("s1 abc\ns2 cab\n")
    (data / "src_lang").write_text("s1 es\ns2 fr\n")
    (data / "tgt_lang").write_text("s1 fr\ns2 de\n")
    argv = [
        "--ngpu", "0", "--batch_size", "1", "--beam_size", "2", "--maxlenratio", "1.0",
        "--data_path_and_name_and_type", f"{data}/text.src,src_text,text",
        "--mt_train_config", str(exp / "config.yaml"), "--mt_model_file", str(exp / "model.pth"),
        "--output_dir", str(tmp_path / "out"),
        "--encoder_task_tag_file", "src_lang", "--decoder_task_tag_file", "tgt_lang",
    ]  # fmt: skip
    mt_decode(argv)
    utterances = per_utterance(spy)
    assert [u[0] for u in utterances] == [[None, 0, 2], [None, 2, 1]]
    assert [u[1] for u in utterances] == [{0, 2}, {1, 2}]
    assert all(u[2] for u in utterances)


def test_st_decoding_of_a_task_conditioned_model(tmp_path, spy):
    """Our ST task's model decoded through ESPnet's Speech2Text (espnet_ext.tasks.st): each utterance with
    its task's heads on both sides and its target language's decoder start."""
    config = speech_config({"task_tags": TAGS, "target_languages": ["en", "pt"], "asr_weight": 0.0})
    tokens = str(tmp_path / "tokens.txt")
    common = ["--input_size", str(FEATS), "--token_type", "char", "--src_token_type", "char"]
    exp = save_model(tmp_path, STTask, config, common + ["--src_token_list", tokens])
    data = speech_data(tmp_path)
    (data / "tgt").write_text("u1 pt\nu2 en\nu3 en\nu4 pt\n")
    tags = ["--task_tag_file", "lang", "--target_language_tag_file", "tgt"]
    st_decode(speech_decoding_args("st", exp, data, tmp_path / "out") + tags)
    utterances = per_utterance(spy)
    assert [u[0][0] for u in utterances] == [1, 2, 1, 0]
    assert [u[1] for u in utterances] == [{1}, {2}, {1}, {0}]
    assert all(u[2] for u in utterances)
    assert [e[1] for e in spy if e[0] == "language"] == [1, 0, 0, 1]
    hyps = (tmp_path / "out" / "1best_recog" / "text").read_text().split("\n")
    assert [h.split(" ")[0] for h in hyps if h] == ["u1", "u2", "u3", "u4"]


def test_tag_file_without_task_tags_in_the_model_is_refused(tmp_path):
    conf = tmp_path / "config.yaml"
    conf.write_text(yaml.safe_dump({"model_conf": {"ctc_weight": 0.3}}))
    refused = pytest.raises(ConfigError, match=r"config.yaml: key 'model_conf.task_tags'")
    with refused, task_conditioned.task_id_data({"--task_tag_file": "lang"}, str(conf), []):
        pass


def test_adapter_models_refuse_zero_shot_directions(tmp_path):
    tags = tmp_path / "direction"
    tags.write_text("t1 es-en\nt2 es-fr\n")
    with pytest.raises(InputError, match=r"direction:2: key 't2'.*cannot serve a zero-shot"):
        task_ids(tags, ["es-en", "fr-en"], adapters=True)
    assert task_ids(tags, ["es-fr", "es-en"]) == {"t1": 1, "t2": 0}


def test_task_tags_cli_writes_the_id_table(tmp_path):
    (tmp_path / "lang").write_text("b de\na fr\n")
    assert (
        task_tags_main(["--task_tags", "fr de", str(tmp_path / "lang"), str(tmp_path / "ids")]) == 0
    )
    assert (tmp_path / "ids").read_text() == "a 0\nb 1\n"
    assert task_tags_main(["--task_tags", "fr", str(tmp_path / "lang"), str(tmp_path / "x")]) == 1
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "lines, where",
    [
        ("a de\nb fr\nb de\n", "lang:3: key 'b': duplicate id (first at line 2)"),  # in order
        ("b de\na fr\nb de\n", "lang:3: key 'b': duplicate id (first at line 1)"),  # sorted on disk
    ],
)
def test_task_tags_cli_refuses_a_repeated_id_at_its_lines(tmp_path, capsys, lines, where):
    (tmp_path / "lang").write_text(lines)
    out = tmp_path / "ids"
    assert task_tags_main(["--task_tags", "fr de", str(tmp_path / "lang"), str(out)]) == 1
    assert where in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lang"]  # nothing left behind


ST_MODEL_CONF = {"selection_kl_weight": 0.1, "task_tags": TAGS, "asr_weight": 0.0}


def st_args(tmp_path, config: dict):
    """``config`` written to the experiment dir, with its token list -> (ST options, the common argv)."""
    (tmp_path / "tokens.txt").write_text("\n".join(TOKENS) + "\n")
    conf = tmp_path / "st.yaml"
    conf.write_text(yaml.safe_dump(config))
    tokens = str(tmp_path / "tokens.txt")
    common = ["--config", str(conf), "--token_list", tokens, "--src_token_list", tokens]
    return STTask.get_parser().parse_args(common + ["--input_size", str(FEATS)]), common


def test_st_task_builds_task_conditioned_models(tmp_path):
    # head selection in the encoder, ESPnet's decoder
    config = dict(speech_config(ST_MODEL_CONF), decoder="transformer", decoder_conf=DECODER)
    args, common = st_args(tmp_path, config)
    conf = tmp_path / "st.yaml"
    model = STTask.build_model(args)
    assert isinstance(model, TaskConditionedSTModel) and model.task_tags == TAGS
    loss, stats, _ = model(
        speech=torch.randn(2, 6, FEATS),
        speech_lengths=torch.tensor([6, 5]),
        text=torch.tensor([[2, 3], [4, -1]]),
        text_lengths=torch.tensor([2, 1]),
        task_id=torch.tensor([[2], [0]]),
    )
    assert torch.isfinite(loss) and "selection_kl" in stats
    config["model_conf"] = {"task_tags": ["es", "de"]}  # 2 tags for 3 tasks
    conf.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match="2 task tags, but encoder.encoders.0.self_attn"):
        STTask.build_model(STTask.get_parser().parse_args(common + ["--input_size", "4"]))


def test_decoding_an_adapter_model_refuses_a_zero_shot_direction(tmp_path):
    conf = tmp_path / "config.yaml"
    conf.write_text(
        yaml.safe_dump(
            {"encoder": "adapter_transformer", "model_conf": {"task_tags": ["es-en", "fr-en"]}}
        )
    )
    data = tmp_path / "test"
    data.mkdir()
    (data / "feats.scp").write_text("t1 a.npy\nt2 b.npy\n")
    (data / "direction").write_text("t1 fr-en\nt2 es-fr\n")
    files = {"--task_tag_file": "direction"}
    data_files = [(f"{data}/feats.scp", "speech", "npy")]
    refused = pytest.raises(InputError, match=r"test/direction:2: key 't2'.*zero-shot direction")
    with refused, task_conditioned.task_id_data(files, str(conf), data_files):
        pass


def test_group_strategy_needs_a_multiple_of_the_heads_named_in_the_config(tmp_path):
    (tmp_path / "tokens.txt").write_text("\n".join(TOKENS) + "\n")
    config = {
        "encoder": "head_selection_transformer",
        "encoder_conf": dict(SMALL, num_tasks=3, head_candidates=5, selection_strategy="group"),
    }
    conf = tmp_path / "asr.yaml"
    conf.write_text(yaml.safe_dump(config))
    args = ["--config", str(conf), "--token_list", str(tmp_path / "tokens.txt")]
    args = ASRTask.get_parser().parse_args(args + ["--input_size", "4"])
    with pytest.raises(ConfigError, match="key 'head_candidates'.*multiple of 2 heads, got 5"):
        ASRTask.build_model(args)


def test_a_one_task_batch_carries_its_id_once_and_trains_as_per_row_ids(tmp_path):
    """OneTaskBatches: the collated column of one task's batch is (1, 1) (decided on the host), and the
    model computes with it what it computes with the id repeated per row: the same loss and gradients
    (eval mode with gradients: selection without noise), through head selection's one-task path."""
    args, _ = st_args(tmp_path, speech_config(ST_MODEL_CONF))
    collate = STTask.build_collate_fn(args, train=True)
    rng = np.random.default_rng(0)

    def utterance(i, task):
        return f"utt{i}", {
            "speech": rng.standard_normal((6 - i, FEATS)).astype(np.float32),
            "text": np.array([2, 3, 4][: 3 - i]),
            "task_id": np.array([task]),
        }

    _, one = collate([utterance(0, 2), utterance(1, 2), utterance(2, 2)])
    _, mixed = collate([utterance(0, 2), utterance(1, 0), utterance(2, 2)])
    assert one["task_id"].tolist() == [[2]] and one["task_id_lengths"].tolist() == [1]
    assert mixed["task_id"].tolist() == [[2], [0], [2]]  # rows of several tasks stay per row
    per_row = dict(one, task_id=torch.full((3, 1), 2), task_id_lengths=torch.ones(3, dtype=int))

    torch.manual_seed(0)
    model = STTask.build_model(args).eval()
    results = []
    for batch in (one, per_row):
        model.zero_grad(set_to_none=True)  # each forward's gradients in tensors of their own
        loss, _, _ = model(**batch)
        loss.backward()
        layer = model.encoder.encoders[0].self_attn
        results.append((loss.detach(), [p.grad for p in model.parameters()], layer.task_id))
    (loss_one, grads_one, ids_one), (loss_rows, grads_rows, ids_rows) = results
    assert ids_one.numel() == 1 and ids_rows.numel() == 3  # the one-task path, then the per-row one
    torch.testing.assert_close(loss_one, loss_rows)
    for got, expected in zip(grads_one, grads_rows):
        assert (got is None) == (expected is None)
        if got is not None:
            torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "ngpu,distributed,stats,collapsed",
    [
        (0, False, False, True),
        (2, True, False, True),
        (2, False, False, False),
        (0, False, True, False),
    ],
)
def test_one_task_ids_stay_per_row_under_data_parallel_and_in_stats(
    tmp_path, ngpu, distributed, stats, collapsed
):
    """ESPnet's DataParallel (--ngpu 2 in one process) splits the batch's tensors across replicas;
    --collect_stats writes each data name's shape per utterance."""
    from espnet_ext.tasks.asr import ASRTask as OurASRTask
    from espnet_ext.tasks.mt import MTTask as OurMTTask

    args, _ = st_args(tmp_path, speech_config(ST_MODEL_CONF))
    args.ngpu, args.distributed, args.collect_stats = ngpu, distributed, stats
    for task in (STTask, OurASRTask, OurMTTask):
        collate = task.build_collate_fn(args, train=False)
        assert isinstance(collate, task_conditioned.OneTaskIds) == collapsed, task
