"""Head sharing (Fig. 3) and head load (Fig. 4) read from the selection logits of a saved model."""

import numpy as np
import pytest
import torch
import yaml

from espnet_ext.analysis.head_sharing import analyse, main
from espnet_ext.attention.head_selection import HeadSelectionAttention
from espnet_ext.errors import InputError

TAGS = ["es", "fr", "ar"]
# group strategy, H = 2 of H' = 4: groups {0, 1} and {2, 3}; the larger logit of each group wins.
ENCODER_LOGITS = [
    [[3, 0, 3, 0], [0, 3, 3, 0], [3, 0, 0, 3]],  # layer 1: es {0,2}, fr {1,2}, ar {0,3}
    [[3, 0, 0, 3], [3, 0, 0, 3], [0, 3, 0, 3]],  # layer 2: es {0,3}, fr {0,3}, ar {1,3}
]
# subset strategy on the decoder: the two largest logits of four.
DECODER_LOGITS = [[[4, 3, 0, 1], [0, 1, 3, 4], [4, 0, 3, 1]]]  # es {0,1}, fr {2,3}, ar {0,2}


def layer(logits, strategy):
    module = HeadSelectionAttention(2, 8, 0.0, num_tasks=3, head_candidates=4, strategy=strategy)
    with torch.no_grad():
        module.selection_logits.copy_(torch.tensor(logits, dtype=torch.float))
    return module.eval()


@pytest.fixture
def saved(tmp_path):
    modules = {
        f"encoder.encoders.{i}.self_attn": layer(x, "group") for i, x in enumerate(ENCODER_LOGITS)
    }
    modules.update({"decoder.decoders.0.self_attn": layer(DECODER_LOGITS[0], "subset")})
    state = {f"{name}.{k}": v for name, m in modules.items() for k, v in m.state_dict().items()}
    state["ctc.ctc_lo.weight"] = torch.zeros(5, 8)  # the rest of a model is ignored
    torch.save(state, tmp_path / "model.pth")
    config = {
        "encoder_conf": {"attention_heads": 2, "selection_strategy": "group"},
        "decoder_conf": {"attention_heads": 2, "selection_strategy": "subset"},
        "model_conf": {"task_tags": TAGS},
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    return tmp_path, modules


def test_selection_is_what_the_layers_select_at_inference(saved):
    tmp_path, modules = saved
    encoder, decoder = analyse(tmp_path / "model.pth", tmp_path / "config.yaml", tmp_path / "out")
    for sel, prefix in ((encoder, "encoder.encoders"), (decoder, "decoder.decoders")):
        for i in range(sel.mask.shape[0]):
            module = modules[f"{prefix}.{i}.self_attn"]
            for task in range(3):
                heads, _ = module.selection(task)
                assert np.flatnonzero(sel.mask[i, task]).tolist() == heads.tolist()


def test_sharing_and_load_match_hand_counts(saved):
    tmp_path, _ = saved
    encoder, decoder = analyse(tmp_path / "model.pth", tmp_path / "config.yaml", tmp_path / "out")
    # es-fr: layer 1 head 2, layer 2 heads 0 and 3 -> 3; es-ar: {0} + {3} -> 2; fr-ar: {} + {3} -> 1.
    assert encoder.sharing().tolist() == [[4, 3, 2], [3, 4, 1], [2, 1, 4]]
    assert encoder.load().tolist() == [[2, 1, 2, 1], [2, 1, 0, 3]]
    assert decoder.sharing().tolist() == [[2, 0, 1], [0, 2, 1], [1, 1, 2]]
    assert decoder.load().tolist() == [[2, 1, 2, 1]]
    out = tmp_path / "out"
    assert (out / "sharing_encoder.md").read_text().splitlines()[2] == "| es | 4 | 3 | 2 |"
    assert (out / "load_decoder.md").read_text().splitlines()[0] == "| layer | h1 | h2 | h3 | h4 |"
    for name in ("sharing_encoder", "load_encoder", "sharing_decoder", "load_decoder"):
        assert (out / f"{name}.png").read_bytes()[:4] == b"\x89PNG"


def test_a_model_without_head_selection_and_mismatched_tags_are_refused(saved, tmp_path, capsys):
    path, _ = saved
    torch.save({"encoder.embed.weight": torch.zeros(2, 2)}, tmp_path / "plain.pth")
    assert main(["--checkpoint", str(tmp_path / "plain.pth"), "--config", str(path / "config.yaml"),
                 "--out_dir", str(tmp_path / "o")]) == 1  # fmt: skip
    assert "no head-selection layers" in capsys.readouterr().err
    config = yaml.safe_load((path / "config.yaml").read_text())
    config["model_conf"]["task_tags"] = ["es", "fr"]
    (path / "two.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(InputError, match="2 task tags for 3 encoder tasks") as error:
        analyse(path / "model.pth", path / "two.yaml", tmp_path / "o")
    assert error.value.key == "model_conf.task_tags"


def test_st_models_name_each_side_by_its_own_tags(saved, tmp_path):
    """encoder_task_tags / decoder_task_tags (ST: source and target languages) win over task_tags."""
    path, _ = saved
    config = yaml.safe_load((path / "config.yaml").read_text())
    config["model_conf"] = {
        "encoder_task_tags": ["es", "fr", "ar"],
        "decoder_task_tags": ["en", "de", "pt"],
    }
    (path / "st.yaml").write_text(yaml.safe_dump(config))
    analyse(path / "model.pth", path / "st.yaml", tmp_path / "st")
    assert "| es |" in (tmp_path / "st" / "sharing_encoder.md").read_text()
    decoder = (tmp_path / "st" / "sharing_decoder.md").read_text()
    assert "| pt |" in decoder and "| es |" not in decoder
    config["model_conf"]["decoder_task_tags"] = ["en"]
    (path / "bad.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(InputError, match="1 task tags for 3 decoder tasks") as error:
        analyse(path / "model.pth", path / "bad.yaml", tmp_path / "bad")
    assert error.value.key == "model_conf.decoder_task_tags"
