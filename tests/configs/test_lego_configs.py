"""The LegoNN real configs follow the paper where it speaks (Dalmia et al. §V): De-En models of the §V-B size,
encoder-only modules trained with CTC alone (§IV-B3, §V-C1, §V-C2), input embedding tables shared where the
dictionary is one (§V-B), SpecAugment without time warping (§V-A). Their two real-size updates are the
preflight tests (tests/configs/test_real_configs_*.py)."""

from pathlib import Path

import pytest
import yaml

from espnet_ext.features.specaugment import UtteranceSpecAugment
from espnet_ext.registry import build_model

EGS = Path(__file__).resolve().parents[2] / "egs"
WMT = EGS / "wmt" / "mt1" / "conf"
EUROPARL = EGS / "europarl" / "asr1" / "conf"


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def built_mt_model(tmp_path, config: dict, tokens: list[str]):
    """``config`` built through ESPnet's MT task, source and target on the token list ``tokens``."""
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "tokens.txt").write_text("\n".join(tokens) + "\n")
    return build_model(
        "mt",
        ["--config", str(tmp_path / "c.yaml"), "--token_list", str(tmp_path / "tokens.txt")]
        + ["--src_token_list", str(tmp_path / "tokens.txt")],
    )


@pytest.mark.parametrize("ingestor", ["wemb", "beamconv"])
def test_de_en_models_have_the_v_b_architecture(ingestor):
    config = load(WMT / f"train_lego_{ingestor}_deroen.yaml")
    (module,) = config["encoder_conf"]["modules"]
    # §V-B: 12 encoder blocks of d 1024 (the OLC's 6 on the second half), decoder 6 x (1024, 16, 4096)
    assert (module["output_size"], module["num_blocks"], module["olc"]["num_blocks"]) == (
        1024,
        6,
        6,
    )
    # wemb: §V-B's 8 heads / FFN 2048; beamconv: §V-C1's larger encoder blocks (16, 4096)
    heads = {"wemb": (8, 2048), "beamconv": (16, 4096)}[ingestor]
    assert (module["attention_heads"], module["linear_units"]) == heads
    dec = config["decoder_conf"]
    assert (dec["attention_dim"], dec["attention_heads"], dec["linear_units"]) == (1024, 16, 4096)
    assert config["frontend_conf"]["embed_dim"] == 1024
    assert (dec["ingestor"]["attention_heads"], dec["ingestor"]["linear_units"]) == (16, 4096)


@pytest.mark.parametrize(
    "name",
    [
        "train_lego_wemb_deroen.yaml",
        "train_lego_beamconv_deroen.yaml",
        "train_lego_wemb_ende.yaml",
        "train_lego_beamconv_ende.yaml",
    ],
)
def test_one_dictionary_one_input_embedding_table(name):
    """§V-B: 'input embedding tables are shared with encoder, ingestor, and decoder tables where
    applicable': the De-En + Ro-En and En-De dictionaries are joint."""
    config = load(WMT / name)
    assert config["model_conf"]["share_encoder_decoder_input_embed"] is True
    # the WEmb table is the decoder's too; BeamConv's is 300-dim, so it cannot be
    assert config["decoder_conf"]["share_ingestor_embedding"] is ("wemb" in name)


@pytest.mark.parametrize("pair", ["ende", "deroen"])
def test_baseline_encoder_decoder_shares_all_embedding_tables(pair, tmp_path):
    """§V-B's baseline: "All embedding tables are shared across the model" (fairseq's
    --share-all-embeddings): source, decoder input and output projection are one parameter in the built
    model (built smaller; ESPnet only warns when the vocabularies differ, so build it)."""
    config = load(WMT / f"train_encdec_{pair}.yaml")
    assert config["model_conf"]["share_encoder_decoder_input_embed"] is True
    assert config["model_conf"]["share_decoder_input_output_embed"] is True
    config["encoder_conf"].update(num_blocks=1)
    config["decoder_conf"].update(num_blocks=1)
    tokens = ["<blank>", "<unk>", "a", "b", "<sos/eos>"]
    model = built_mt_model(tmp_path, config, tokens)
    table = model.decoder.embed[0].weight
    assert model.frontend.embed[0].weight is table
    assert model.decoder.output_layer.weight is table


def test_shared_tables_are_one_parameter_in_the_built_model(tmp_path, monkeypatch):
    """ESPnet shares the source and decoder tables only when both vocabularies agree (else it warns):
    the built wemb De-En model holds one table for the source, decoder and WEmb (built smaller, as
    the real one is 41k x 1024)."""
    config = load(WMT / "train_lego_wemb_deroen.yaml")
    tokens = ["<blank>", "<unk>", "a", "b", "<sos/eos>"]
    config["encoder_conf"]["modules"][0].update(token_list=tokens, num_blocks=1)
    config["encoder_conf"]["modules"][0]["olc"]["num_blocks"] = 1
    config["decoder_conf"].update(num_blocks=1)
    config["decoder_conf"]["ingestor"]["num_blocks"] = 1
    model = built_mt_model(tmp_path, config, tokens)
    table = model.decoder.embed[0].weight
    assert model.frontend.embed[0].weight is table
    assert any(p is table for p in model.decoder.ingestor.parameters())


@pytest.mark.parametrize(
    "path, decoder, criterion",
    [
        # MT: the paper's checkpoint rule, validation BLEU (of the greedy CTC path: no decoder)
        (WMT / "train_lego_ctc_deroen.yaml", "legonn_none", ["valid", "bleu", "max"]),
        (EUROPARL / "train_legonn_ctc.yaml", "none", ["valid", "loss", "min"]),  # no accuracy
    ],
)
def test_encoder_only_modules_train_with_ctc_alone(path, decoder, criterion):
    config = load(path)
    assert config["model"] == "legonn_ctc" and config["decoder"] == decoder
    assert config["best_model_criterion"] == [criterion]


def test_the_ro_en_encoder_only_module_has_the_v_c1_sizes():
    (module,) = load(WMT / "train_lego_ctc_deroen.yaml")["encoder_conf"]["modules"]
    # §V-C1: "transformer blocks with 512 dimensions, 16 heads, and 4096 feed-forward units"
    assert (module["output_size"], module["attention_heads"], module["linear_units"]) == (
        512,
        16,
        4096,
    )
    assert module["token_list"] == "data/token_list/lego_deroen/tokens.txt"  # the De-En decoder's


def test_the_europarl_encoder_only_model_is_the_legonn_models_encoder():
    ctc = load(EUROPARL / "train_legonn_ctc.yaml")
    full = load(EUROPARL / "train_legonn.yaml")
    for key in ("encoder_conf", "specaug_conf", "optim_conf", "scheduler_conf", "batch_size"):
        assert ctc[key] == full[key], key
    assert ctc["model_conf"]["interface_text_keys"] == full["model_conf"]["interface_text_keys"]


@pytest.mark.parametrize(
    "name", ["train_legonn.yaml", "train_legonn_ctc.yaml", "train_baseline.yaml"]
)
def test_europarl_specaugment_without_time_warping(name):
    """§V-A: 'the SS policy of SpecAugment without time-warping', as fairseq (the paper's library) applies it:
    per utterance, SS of its data_utils.py (freq_mask N 2, F 27; time_mask N 2, T 70, p 0.2)."""
    config = load(EUROPARL / name)
    assert (
        config["specaug"] == "utterance_specaug"
        and config["specaug_conf"]["apply_time_warp"] is False
    )
    ss = UtteranceSpecAugment(**config["specaug_conf"])
    policy = (ss.freq_mask_n, ss.freq_mask_f, ss.time_mask_n, ss.time_mask_t, ss.time_mask_p)
    assert policy == (2, 27, 2, 70, 0.2)


def test_ro_de_en_training_filter_is_moses_clean_corpus_80_and_ratio_1_5(tmp_path):
    """§V-C1: 'a length ratio of 1.5 and 80 as the max token length' (after [37], Moses'
    clean-corpus-n.perl on the tokenized text): pairs of up to 80 tokens a side are kept, 81 dropped,
    and a side over 1.5 times the other dropped; the pipeline's filter stage with max_text_words 80."""
    from espnet_ext.data.filter import filter_data_dir

    pairs = {  # utt: (de tokens, en tokens)
        "u1": (80, 80),
        "u2": (81, 80),
        "u3": (40, 60),
        "u4": (40, 61),
    }
    src = tmp_path / "train"
    src.mkdir()
    for side, i in (("de", 0), ("en", 1)):
        lines = [f"{utt} {' '.join(['w'] * n[i])}\n" for utt, n in sorted(pairs.items())]
        (src / f"text.{side}").write_text("".join(lines))
    (src / "text").write_text((src / "text.en").read_text())
    report = filter_data_dir(
        src,
        tmp_path / "filtered",
        max_text_words=80,
        text_names=["text.de", "text.en"],
        max_length_ratio=1.5,
    )
    assert sorted(report.removed) == ["u2", "u4"]
