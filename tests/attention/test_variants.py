"""The paper's variants as ESPnet2 overrides, and matched inference switched at decoding time."""

import pytest
from espnet2.utils.nested_dict_action import NestedDictAction

from espnet_ext.attention.variants import main, variant_args
from espnet_ext.errors import ConfigError

CONFIG = {
    "encoder": "cnn_transformer",
    "encoder_conf": {"output_size": 16, "attention_sites": None},
    "decoder": "transformer",
    "decoder_conf": {"num_blocks": 1},
}


def test_variants_map_to_sites_with_the_paper_gammas():
    assert variant_args(CONFIG, "baseline") == []
    assert variant_args(CONFIG, "relaxed_cross") == [
        "--decoder",
        "relaxed_transformer",
        "--decoder_conf",
        "attention_sites.src_attn.gamma=0.25",
    ]
    assert (
        variant_args(CONFIG, "relaxed_self", task="mt")[-1]
        == "attention_sites.self_attn.gamma=0.05"
    )
    assert variant_args(CONFIG, "relaxed_self")[:2] == ["--encoder", "relaxed_cnn_transformer"]
    assert variant_args(CONFIG, "smooth_focus")[-1] == "attention_sites.src_attn.smooth_focus=true"
    assert variant_args(CONFIG, "relaxed_cross", gamma=0.1)[-1].endswith("gamma=0.1")


def test_override_merges_into_the_configs_dict_as_espnet_parses_it():
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--decoder_conf", action=NestedDictAction, default={"num_blocks": 1})
    parsed = parser.parse_args(variant_args(CONFIG, "relaxed_cross")[2:])
    assert parsed.decoder_conf == {
        "num_blocks": 1,
        "attention_sites": {"src_attn": {"gamma": 0.25}},
    }


def test_refusals():
    with pytest.raises(ConfigError, match="unknown attention variant"):
        variant_args(CONFIG, "relaxed")
    with pytest.raises(ConfigError, match=r"\[0, 1\]"):
        variant_args(CONFIG, "relaxed_cross", gamma=1.5)
    with pytest.raises(ConfigError, match="needs a Transformer encoder"):
        variant_args({"encoder": "conformer"}, "relaxed_self")


def test_command_line_prints_the_options(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("encoder: transformer\ndecoder: transformer\n")
    main(["--config", str(config), "--variant", "relaxed_self", "--gamma", "0.01"])
    tag, options = capsys.readouterr().out.split("\n")[:2]
    assert tag == "_relaxed_self_g0.01"
    assert options.split() == [
        "--encoder",
        "relaxed_transformer",
        "--encoder_conf",
        "attention_sites.self_attn.gamma=0.01",
    ]
    config.write_text("encoder: transformer\n")
    main(["--config", str(config), "--variant", "baseline"])
    assert capsys.readouterr().out == "\n\n"  # both lines empty: read by the pipelines as two lines


def test_matched_inference_option_is_parsed_by_the_inference_entry_points():
    from espnet2.bin.mt_inference import get_parser

    from espnet_ext.bin.inference_entry import get_parser as our_parser

    parser = our_parser(get_parser)
    required = ["--output_dir", "o", "--data_path_and_name_and_type", "text,src_text,text"]
    assert parser.parse_args(["--matched_inference", "true", *required]).matched_inference is True
    assert parser.parse_args(["--matched_inference=false", *required]).matched_inference is False
    assert parser.parse_args(required).matched_inference is None
    with pytest.raises(SystemExit):
        parser.parse_args(["--matched_inference", "maybe", *required])


def test_experiment_tags_name_the_variant_and_gamma(tmp_path, capsys):
    from espnet_ext.attention.variants import resolve_variant

    assert resolve_variant(CONFIG, "baseline").tag == ""
    assert resolve_variant(CONFIG, "smooth_focus").tag == "_smooth_focus"
    assert resolve_variant(CONFIG, "relaxed_cross", gamma=0.15).tag == "_relaxed_cross_g0.15"
    assert resolve_variant(CONFIG, "relaxed_self").tag == "_relaxed_self_g0.01"
    assert resolve_variant(CONFIG, "relaxed_self", task="mt").tag == "_relaxed_self_g0.05"


def test_sharp_attention_rows_are_the_papers_models(tmp_path, capsys):
    config = tmp_path / "ocr.yaml"
    config.write_text("model: soft_attention\n")
    expected = {
        "soft": "--model soft_attention",
        "hard": "--model hard_attention",
        "chain": "--model sharp_attention --model_conf context=chain",
        "reference": "--model sharp_attention --model_conf reference_images=data/reference_digits.npy",
    }
    for row, options in expected.items():
        main(["--config", str(config), "--task", "ocr", "--variant", row])
        assert capsys.readouterr().out.splitlines() == [row, options]
    with pytest.raises(SystemExit, match="unknown attention 'sharp'"):
        main(["--config", str(config), "--task", "ocr", "--variant", "sharp"])
