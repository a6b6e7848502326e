"""freeze_finetune_updates (AV-HuBERT's fine-tuning, avhubert/hubert_asr.py AVHubertSeq2Seq.forward): the
front-end and encoder do not change during the first N optimizer updates, the decoder does; from update N
on both do. Counted per update also with gradient accumulation, carried over a resume, built by the task."""

import pytest
import torch
import yaml

from espnet_ext.errors import ConfigError
from espnet_ext.registry import build_model

TOKENS = "<blank>\n<unk>\na\nb\n<sos/eos>\n"


def tiny_model(tmp_path, accum_grad=1, **model_conf):
    config = {
        "frontend": "conv3d_resnet18",
        "frontend_conf": {"relu_type": "relu", "resnet_stages": 1},
        "normalize": None,
        "encoder": "relaxed_avhubert",
        "encoder_conf": dict(
            output_size=16,
            attention_heads=2,
            linear_units=24,
            num_blocks=2,
            conv_pos=4,
            conv_pos_groups=2,
            layerdrop=0.0,
        ),  # fmt: skip
        "decoder": "relaxed_transformer",
        "decoder_conf": {"attention_heads": 2, "linear_units": 24, "num_blocks": 1},
        "model_conf": {"ctc_weight": 0.0, **model_conf},
        "accum_grad": accum_grad,
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "tokens.txt").write_text(TOKENS)
    torch.manual_seed(0)
    return build_model(
        "espnet_ext.tasks.lip_reading:LipReadingTask",
        ["--config", str(tmp_path / "c.yaml"), "--token_list", str(tmp_path / "tokens.txt"),
         "--token_type", "char"],
    )  # fmt: skip


def snapshot(module):
    return {k: v.detach().clone() for k, v in module.named_parameters()}


def changed(before, module):
    return [k for k, v in module.named_parameters() if not torch.equal(before[k], v)]


BATCH = dict(
    video=torch.rand(2, 6, 24, 24),
    video_lengths=torch.tensor([6, 4]),
    text=torch.tensor([[2, 3], [3, -1]]),
    text_lengths=torch.tensor([2, 1]),
)


def train(model, optimizer, updates, accum_grad):
    """ESPnet's trainer loop: backward every mini-batch, step every accum_grad mini-batches."""
    model.train()
    for _ in range(updates):
        for _ in range(accum_grad):
            loss, _, _ = model(**BATCH)
            (loss / accum_grad).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


@pytest.mark.parametrize("accum_grad", [1, 3])
def test_encoder_frozen_for_the_first_n_updates_then_trained(tmp_path, accum_grad):
    model = tiny_model(tmp_path, accum_grad=accum_grad, freeze_finetune_updates=2)
    assert model.accum_grad == accum_grad  # the task passes the trainer's --accum_grad
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    frontend, encoder, decoder = (
        snapshot(m) for m in (model.frontend, model.encoder, model.decoder)
    )

    train(model, optimizer, 2, accum_grad)  # updates 1 and 2: frozen
    assert model.finetune_updates() == 2 and not model.encoder_frozen()
    assert changed(frontend, model.frontend) == [] and changed(encoder, model.encoder) == []
    assert changed(decoder, model.decoder)  # the decoder learns meanwhile
    # Running statistics of the ResNet's batch norms still move (training mode, as under fairseq's
    # no_grad), but nothing that the optimizer owns.
    assert all(p.grad is None for p in model.encoder.parameters())

    train(model, optimizer, 1, accum_grad)  # update 3: fine-tuned
    assert len(changed(encoder, model.encoder)) == len(encoder)
    assert changed(frontend, model.frontend)


def test_counter_survives_a_resume_and_ignores_evaluation(tmp_path):
    model = tiny_model(tmp_path, freeze_finetune_updates=3)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    train(model, optimizer, 2, 1)
    model.eval()
    with torch.no_grad():
        model(**BATCH)  # validation batches are no updates
    assert model.finetune_updates() == 2
    resumed = tiny_model(tmp_path / "..", freeze_finetune_updates=3)
    resumed.load_state_dict(model.state_dict())
    assert resumed.finetune_updates() == 2 and resumed.encoder_frozen()
    encoder = snapshot(resumed.encoder)
    train(resumed, torch.optim.Adam(resumed.parameters(), lr=1e-2), 1, 1)  # update 3: still frozen
    assert changed(encoder, resumed.encoder) == [] and not resumed.encoder_frozen()


def test_training_batches_read_nothing_back_from_the_device(tmp_path):
    """The count lives on the host beside its buffer: a training batch asks the device nothing to know
    whether the encoder is frozen (on a GPU every read would wait for the queued work)."""
    from host_sync import HostSyncs

    model = tiny_model(tmp_path, freeze_finetune_updates=2).train()
    model(**BATCH)[0].backward()  # the first batch reads the buffer once
    with HostSyncs() as syncs:
        frozen, updates = model.encoder_frozen(), model.finetune_updates()
    assert syncs.found == [] and frozen and updates == 1
    assert int(model.finetune_batches) == 1  # the buffer (checkpoints, resume) counts alike
    state = model.state_dict()
    state["finetune_batches"] = torch.tensor(5)  # a load replaces the count: read again
    model.load_state_dict(state)
    assert model.finetune_updates() == 5 and not model.encoder_frozen()


def test_no_freezing_by_default_and_state_dict_unchanged(tmp_path):
    model = tiny_model(tmp_path)
    assert "finetune_batches" not in model.state_dict() and not model.encoder_frozen()
    loss, _, _ = model(**BATCH)
    loss.backward()
    assert all(p.grad is not None for p in model.encoder.parameters())


def test_bad_value_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match="freeze_finetune_updates"):
        tiny_model(tmp_path, freeze_finetune_updates=-1)


def test_dataparallel_replicas_are_refused(tmp_path):
    """A DataParallel replica's buffer updates are lost: the encoder would stay frozen for good."""
    model = tiny_model(tmp_path, freeze_finetune_updates=2).train()
    model._is_replica = True  # what torch.nn.parallel.replicate marks its copies with
    with pytest.raises(ConfigError, match="DDP"):
        model(**BATCH)
