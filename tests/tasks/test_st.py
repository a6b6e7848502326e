"""Our ST task (espnet_ext.tasks.st): ``--model espnet|task_conditioned`` on ESPnet2's STTask, built from
the model ESPnet's own build_model makes, and the same choice at decoding."""

import argparse

import pytest
import torch
import yaml
from espnet2.st.espnet_model import ESPnetSTModel
from espnet2.tasks import st as espnet_st
from espnet2.torch_utils.initialize import initialize

from espnet_ext.errors import ConfigError, InputError
from espnet_ext.nets.target_language import token_embedding
from espnet_ext.nets.task_models import TaskConditionedSTModel
from espnet_ext.registry import install

install()  # registration, as in the entry points

from espnet_ext.bin.st_inference import Speech2Text  # noqa: E402
from espnet_ext.tasks.st import STTask, from_espnet_model, split_model_conf  # noqa: E402

TOKENS = ["<blank>", "<unk>", "a", "b", "c", "<sos/eos>"]
SELECTION = dict(num_tasks=3, head_candidates=4, selection_strategy="group")
LAYERS = dict(attention_heads=2, linear_units=16, num_blocks=1, dropout_rate=0.0)
OURS = {
    "task_tags": ["es", "de", "fr"],
    "target_languages": ["en", "pt"],
    "selection_kl_weight": 0.1,
}
# ESPnet's own keys, with the ASR branch (CTC and extra decoder) kept
ESPNETS = {"asr_weight": 0.3, "mtlalpha": 0.5, "st_mtlalpha": 0.2, "lsm_weight": 0.1}


def write_config(tmp_path, model: str, model_conf: dict, init=None, encoder="head_selection"):
    (tmp_path / "tokens.txt").write_text("\n".join(TOKENS) + "\n")
    selection = SELECTION if encoder == "head_selection" else {}
    config = {
        "model": model,
        "model_conf": model_conf,
        "init": init,
        "frontend": None,
        "normalize": None,
        "encoder": f"{encoder}_transformer",
        "encoder_conf": dict(LAYERS, output_size=8, input_layer="linear", **selection),
        "decoder": f"{encoder}_transformer",
        "decoder_conf": dict(LAYERS, **selection),
        "extra_asr_decoder": "transformer",
        "extra_asr_decoder_conf": LAYERS,
    }
    conf = tmp_path / "st.yaml"
    conf.write_text(yaml.safe_dump(config))
    tokens = str(tmp_path / "tokens.txt")
    return ["--config", str(conf), "--token_list", tokens, "--src_token_list", tokens]


def build(task, argv, seed=0):
    args = task.get_parser().parse_args(argv + ["--input_size", "4"])
    torch.manual_seed(seed)
    return task.build_model(args), args


def _without_model(argv):
    """ESPnet's STTask knows no ``model`` key: the same config without it."""
    conf = argv[1]
    with open(conf, encoding="utf-8") as f:
        config = yaml.safe_load(f)
    config.pop("model")
    with open(conf, "w", encoding="utf-8") as f:
        yaml.safe_dump(config, f)
    return argv


def test_task_conditioned_model_is_espnets_plus_its_task_parameters(tmp_path):
    ours, args = build(STTask, write_config(tmp_path, "task_conditioned", {**OURS, **ESPNETS}))
    assert type(ours) is TaskConditionedSTModel
    # what ESPnet's own task builds from the same config without our keys, on the same seed
    espnets, _ = build(espnet_st.STTask, _without_model(write_config(tmp_path, "x", ESPNETS)))
    mine, theirs = ours.state_dict(), espnets.state_dict()
    assert set(mine) - set(theirs) == {"target_language_start.weight"}
    assert all(mine[k].shape == v.shape and torch.equal(mine[k], v) for k, v in theirs.items())
    assert hasattr(ours, "ctc") and hasattr(ours, "extra_asr_decoder")  # ESPnet's rules kept them
    assert ours.selection_kl_weight == 0.1 and ours.criterion_st.smoothing == 0.1
    # ESPnet's changes to args stay (config.yaml portable), ours are undone
    assert args.token_list == TOKENS and args.src_token_list == TOKENS
    assert args.model_conf == {**OURS, **ESPNETS} and args.init is None


def test_init_runs_last_on_the_whole_model(tmp_path):
    initialised, args = build(
        STTask, write_config(tmp_path, "task_conditioned", OURS, "xavier_uniform")
    )
    assert args.init == "xavier_uniform"
    model, _ = build(STTask, write_config(tmp_path, "task_conditioned", OURS))
    initialize(model, "xavier_uniform")  # what ESPnet's build_model ends with
    expected = model.state_dict()
    assert all(torch.equal(v, expected[k]) for k, v in initialised.state_dict().items())


def test_espnet_model_is_exactly_espnets(tmp_path):
    argv = write_config(tmp_path, "espnet", ESPNETS, encoder="relaxed")
    ours, args = build(STTask, argv)
    espnets, _ = build(espnet_st.STTask, _without_model(argv))
    assert type(ours) is ESPnetSTModel and args.model == "espnet"
    assert all(torch.equal(ours.state_dict()[k], v) for k, v in espnets.state_dict().items())
    assert ours.state_dict().keys() == espnets.state_dict().keys()


def test_unknown_model_is_refused_naming_the_key(tmp_path):
    argv = write_config(tmp_path, "conformer_st", OURS)
    with pytest.raises(ConfigError, match=r"st.yaml: key 'model': 'conformer_st' is not one of"):
        build(STTask, argv)
    with pytest.raises(SystemExit):  # on the command line, argparse's choices
        STTask.get_parser().parse_args(argv + ["--model", "conformer_st"])


def test_our_keys_for_espnets_model_are_espnets_error(tmp_path):
    with pytest.raises(TypeError, match="unexpected keyword argument .selection_kl_weight"):
        build(STTask, write_config(tmp_path, "espnet", OURS))


def test_espnet_is_left_as_it_was(tmp_path):
    build(STTask, write_config(tmp_path, "task_conditioned", OURS))
    assert espnet_st.ESPnetSTModel is ESPnetSTModel
    assert espnet_st.STTask.build_model.__func__.__module__ == "espnet2.tasks.st"
    actions = {a.dest for a in espnet_st.STTask.get_parser()._actions}
    assert "model" not in actions and "model_conf" in actions


def test_split_model_conf_holds_back_only_our_keys():
    espnets, ours = split_model_conf({**OURS, **ESPNETS, "unknown": 1}, TaskConditionedSTModel)
    assert ours == OURS and espnets == {**ESPNETS, "unknown": 1}


def test_a_sub_module_espnet_keeps_and_ours_drops_is_refused(tmp_path):
    class DropsTheExtraDecoder(TaskConditionedSTModel):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            del self.extra_asr_decoder

    espnets, _ = build(espnet_st.STTask, _without_model(write_config(tmp_path, "x", ESPNETS)))
    with pytest.raises(RuntimeError, match=r"sub-modules \['extra_asr_decoder'\]"):
        from_espnet_model(espnets, DropsTheExtraDecoder, {**OURS, **ESPNETS})


def test_decoding_loads_the_chosen_class_and_all_its_weights(tmp_path):
    ours, args = build(STTask, write_config(tmp_path, "task_conditioned", {**OURS, **ESPNETS}))
    exp = tmp_path / "exp"
    exp.mkdir()
    with torch.no_grad():
        ours.target_language_start.weight.fill_(0.25)
    (exp / "config.yaml").write_text(yaml.safe_dump(vars(args)))
    torch.save(ours.state_dict(), exp / "model.pth")
    decoder = Speech2Text(st_model_file=str(exp / "model.pth"), beam_size=2, device="cpu")
    model = decoder.st_model
    assert type(model) is TaskConditionedSTModel and not model.training
    loaded = model.state_dict()
    assert loaded.keys() == ours.state_dict().keys()
    assert all(torch.equal(loaded[k], v) for k, v in ours.state_dict().items())
    assert decoder.beam_search.full_scorers["decoder"] is model.decoder  # what the search runs
    embedding = token_embedding(
        model.decoder
    )  # the search's decoder starts from the language, once
    assert len(embedding._forward_hooks) == 1
    with pytest.raises(InputError, match="needs a target language"):
        embedding(torch.tensor([[model.sos]]))
    model.set_task_id(task_id=torch.tensor([0]), target_language_id=torch.tensor([1]))
    assert torch.equal(embedding(torch.tensor([[model.sos]]))[0, 0], torch.full((8,), 0.25))
    assert decoder.st_train_args.model == "task_conditioned"
    assert isinstance(decoder.st_train_args, argparse.Namespace)
    torch.save(
        {k: v for k, v in ours.state_dict().items() if "target_language" not in k}, exp / "x.pth"
    )
    with pytest.raises(InputError, match="missing keys.*target_language_start"):
        Speech2Text(exp / "config.yaml", str(exp / "x.pth"), beam_size=2)
