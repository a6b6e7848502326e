"""Per-task adapters: identity at start, per-utterance routing, frozen shared model, zero-shot refusal."""

import pytest
import torch
from compiled_check import eager_and_compiled, graphs, same_step
from espnet2.asr.ctc import CTC
from espnet2.asr.decoder.transformer_decoder import TransformerDecoder
from espnet2.asr.encoder.transformer_encoder import TransformerEncoder

from espnet_ext.attention.head_selection import set_task_id
from espnet_ext.errors import ConfigError, InputError
from espnet_ext.nets.adapters import (
    AdapterTransformerDecoder,
    AdapterTransformerEncoder,
    BottleneckAdapter,
    load_shared_model,
)
from espnet_ext.nets.task_models import TaskConditionedASRModel

FEATS, VOCAB = 5, 7
ENC = dict(output_size=8, attention_heads=2, linear_units=16, num_blocks=2, input_layer="linear")
DEC = dict(attention_heads=2, linear_units=16, num_blocks=2)


def nonzero_adapters(module, seed=0):
    torch.manual_seed(seed)
    for adapter in module.modules():
        if isinstance(adapter, BottleneckAdapter):
            torch.nn.init.normal_(adapter.up.weight)
    return module


def test_adapter_is_the_bottleneck_formula_and_starts_as_identity():
    adapter = BottleneckAdapter(4, 3)
    x = torch.randn(2, 5, 4)
    torch.testing.assert_close(adapter(x), x)
    torch.nn.init.normal_(adapter.up.weight)
    norm = (x - x.mean(-1, keepdim=True)) / torch.sqrt(
        x.var(-1, unbiased=False, keepdim=True) + 1e-5
    )
    hidden = torch.clamp(norm @ adapter.down.weight.T + adapter.down.bias, min=0)
    torch.testing.assert_close(adapter(x), x + hidden @ adapter.up.weight.T + adapter.up.bias)
    assert (
        AdapterTransformerEncoder(FEATS, num_tasks=2, **ENC)
        .adapters[0]
        .per_task[1]
        .down.out_features
        == 256
    )


def test_fresh_adapter_model_loaded_from_the_shared_one_computes_it():
    torch.manual_seed(0)
    shared = TransformerEncoder(FEATS, **ENC).eval()
    ours = AdapterTransformerEncoder(FEATS, num_tasks=3, adapter_dim=4, **ENC).eval()
    load_shared_model(ours, shared.state_dict())
    x, lengths = torch.randn(2, 6, FEATS), torch.tensor([6, 4])
    set_task_id(ours, torch.tensor([2, 0]))
    torch.testing.assert_close(ours(x, lengths)[0], shared(x, lengths)[0])
    with pytest.raises(ConfigError, match="key 'embed"):
        load_shared_model(ours, {k: v for k, v in shared.state_dict().items() if "embed" not in k})


def test_mixed_batch_equals_each_utterance_alone():
    enc = nonzero_adapters(
        AdapterTransformerEncoder(FEATS, num_tasks=3, adapter_dim=4, **ENC)
    ).eval()
    x, lengths, tasks = torch.randn(3, 6, FEATS), [6, 3, 5], [2, 0, 2]
    set_task_id(enc, torch.tensor(tasks))
    mixed = enc(x, torch.tensor(lengths))[0]
    for i, (n, t) in enumerate(zip(lengths, tasks)):
        set_task_id(enc, torch.tensor([t]))
        torch.testing.assert_close(mixed[i, :n], enc(x[i : i + 1, :n], torch.tensor([n]))[0][0])
    set_task_id(enc, torch.tensor([1, 0, 2]))
    assert not torch.allclose(enc(x, torch.tensor(lengths))[0][0], mixed[0])  # tasks differ


def test_incremental_decoding_adapts_each_position_once():
    dec = nonzero_adapters(AdapterTransformerDecoder(VOCAB, 8, num_tasks=2, adapter_dim=4, **DEC))
    dec.eval()
    memory, ys = torch.randn(1, 5, 8), torch.randint(0, VOCAB, (1, 4))
    set_task_id(dec, torch.tensor([1]))
    full = dec(memory, torch.tensor([5]), ys, torch.tensor([4]))[0].log_softmax(-1)
    state = None
    for step in range(1, 5):
        logp, state = dec.score(ys[0, :step], state, memory[0])
        torch.testing.assert_close(logp, full[0, step - 1], atol=1e-5, rtol=1e-5)


def adapter_asr_model():
    torch.manual_seed(0)
    tokens = ["<blank>", "<unk>", "a", "b", "c", "d", "<sos/eos>"]
    return TaskConditionedASRModel(
        vocab_size=VOCAB,
        token_list=tokens,
        frontend=None,
        specaug=None,
        normalize=None,
        preencoder=None,
        encoder=AdapterTransformerEncoder(FEATS, num_tasks=3, adapter_dim=4, **ENC),
        postencoder=None,
        decoder=AdapterTransformerDecoder(VOCAB, 8, num_tasks=3, adapter_dim=4, **DEC),
        ctc=CTC(VOCAB, 8),
        joint_network=None,
        report_cer=False,
        report_wer=False,
        train_adapters_only=True,
    )


def test_frozen_shared_model_gets_no_gradient_and_does_not_change():
    model = adapter_asr_model()
    shared = TransformerEncoder(FEATS, **ENC)
    load_shared_model(model.encoder, shared.state_dict())
    before = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.1)
    batch = dict(
        speech=torch.randn(2, 6, FEATS),
        speech_lengths=torch.tensor([6, 5]),
        text=torch.tensor([[2, 3, 4], [5, 2, -1]]),
        text_lengths=torch.tensor([3, 2]),
        task_id=torch.tensor([0, 2]),
    )
    model(**batch)[0].backward()
    optimizer.step()
    after = model.state_dict()
    adapters = [k for k in after if ".adapters." in k]
    shared_keys = [k for k in after if ".adapters." not in k]
    assert adapters and shared_keys
    for name, param in model.named_parameters():
        if ".adapters." not in name:
            assert param.grad is None and not param.requires_grad, name
    assert all(torch.equal(before[k], after[k]) for k in shared_keys)
    changed = [k for k in adapters if not torch.equal(before[k], after[k])]
    assert any(".per_task.0." in k for k in changed) and any(".per_task.2." in k for k in changed)
    assert not any(".per_task.1." in k for k in changed)  # task 1 was not in the batch


def test_zero_shot_direction_is_refused():
    model = adapter_asr_model()
    batch = dict(
        speech=torch.randn(1, 6, FEATS),
        speech_lengths=torch.tensor([6]),
        text=torch.tensor([[2, 3]]),
        text_lengths=torch.tensor([2]),
    )
    with pytest.raises(InputError, match="key 'task_id'.*task id 3 unknown.*zero-shot"):
        model(**batch, task_id=torch.tensor([3]))
    with pytest.raises(ConfigError, match="adapter_dim"):
        AdapterTransformerEncoder(FEATS, num_tasks=2, adapter_dim=0, **ENC)
    # a model without adapters has nothing to train
    with pytest.raises(ConfigError, match="train_adapters_only"):
        TaskConditionedASRModel(
            vocab_size=VOCAB,
            token_list=["<blank>", "<unk>", "a", "b", "c", "d", "<sos/eos>"],
            frontend=None,
            specaug=None,
            normalize=None,
            preencoder=None,
            encoder=TransformerEncoder(FEATS, **ENC),
            postencoder=None,
            decoder=TransformerDecoder(VOCAB, 8, **DEC),
            ctc=CTC(VOCAB, 8),
            joint_network=None,
            train_adapters_only=True,
        )


def test_without_gradients_rows_gather_their_tasks_adapter_and_never_synchronise():
    """Validation and decoding (no gradients): each row's adapter parameters gathered, batched products;
    the same as each task's own adapter on its rows (the training path, which reads the tasks present
    back to the host), with nothing read back."""
    from host_sync import HostSyncs

    enc = AdapterTransformerEncoder(FEATS, num_tasks=3, adapter_dim=4, **ENC).eval()
    torch.manual_seed(1)
    for p in enc.adapters.parameters():
        torch.nn.init.normal_(p)  # LayerNorm scale and shift too
    x, lengths, hidden = torch.randn(3, 6, FEATS), torch.tensor([6, 3, 5]), torch.randn(3, 6, 8)
    for tasks in ([2, 0, 2], [1]):
        set_task_id(enc, torch.tensor(tasks))
        with HostSyncs() as syncs:
            expected = enc.adapters[0](hidden)
        assert syncs.found  # the training path reads the tasks present
        with torch.no_grad(), HostSyncs() as syncs:
            got = enc.adapters[0](hidden)
        assert syncs.found == []
        torch.testing.assert_close(got, expected.detach(), rtol=1e-5, atol=1e-6)
        expected = enc(x, lengths)[0].detach()
        with torch.no_grad():
            torch.testing.assert_close(enc(x, lengths)[0], expected, rtol=1e-5, atol=1e-6)


def test_training_reads_the_tasks_present_once_a_forward_not_once_a_layer(monkeypatch):
    # each adapter layer used to read the tasks present back itself (18 layers of the S2T model: 18 reads
    # and one per task each); an encoder's and a decoder's adapters now share one grouping, one read each
    from host_sync import HostSyncs

    from espnet_ext.nets.adapters import TaskRows

    tasks = torch.tensor([2, 0, 2, 0])  # task 1 absent
    with HostSyncs() as syncs:
        rows = TaskRows.of(tasks, 3)
    assert (
        len({entry.split(" at ")[1] for entry in syncs.found}) == 1
    )  # the counts' one read (tolist)
    assert rows.tasks == [0, 2] and [r.tolist() for r in rows.rows] == [[1, 3], [0, 2]]
    groupings = []
    original = TaskRows.of.__func__
    monkeypatch.setattr(
        TaskRows, "of", classmethod(lambda cls, *a: groupings.append(a) or original(cls, *a))
    )
    enc = nonzero_adapters(
        AdapterTransformerEncoder(FEATS, num_tasks=3, adapter_dim=4, **ENC).eval()
    )
    dec = nonzero_adapters(
        AdapterTransformerDecoder(VOCAB, 8, num_tasks=3, adapter_dim=4, **DEC).eval()
    )
    x, lengths = torch.randn(4, 6, FEATS), torch.tensor([6, 3, 5, 6])
    ys, ys_lengths = (
        torch.tensor([[1, 2, 3], [4, 5, 0], [2, 2, 2], [3, 1, 0]]),
        torch.tensor([3, 2, 3, 2]),
    )
    set_task_id(enc, tasks)
    set_task_id(dec, tasks)
    hidden = enc(x, lengths)[0]
    out = dec(hidden, lengths, ys, ys_lengths)[0]
    assert len(groupings) == 2  # one per forward, for 2 + 2 adapter layers
    out.sum().backward()
    for adapters in (enc.adapters, dec.adapters):
        for layer in adapters:
            assert all(
                p.grad is None for p in layer.per_task[1].parameters()
            )  # absent: no gradient
            assert all(p.grad is not None for t in (0, 2) for p in layer.per_task[t].parameters())
            assert layer.rows is None  # the grouping lives for one forward
    for i, t in enumerate(tasks.tolist()):  # each utterance as its task's adapter alone gives it
        set_task_id(enc, torch.tensor([t]))
        n = int(lengths[i])
        torch.testing.assert_close(hidden[i, :n], enc(x[i : i + 1, :n], lengths[i : i + 1])[0][0])


def test_compiled_layers_keep_their_adapters_eager_and_add_no_graph_per_task_set():
    from espnet_ext.nets.adapters import AdapterS2TTransformerEncoder

    options = dict(num_tasks=4, adapter_dim=8, output_size=32, attention_heads=4, linear_units=64)
    options.update(num_blocks=2, conv_channels=16, dropout_rate=0.0, positional_dropout_rate=0.0)
    eager, compiled = eager_and_compiled(
        lambda **extra: nonzero_adapters(AdapterS2TTransformerEncoder(FEATS, **options, **extra))
    )  # one seed: the same weights, the adapters' included

    def run(encoder, x, lengths, tasks):
        set_task_id(encoder, tasks)
        return encoder(x, lengths)[0]

    x, lengths = torch.randn(3, 40, FEATS), torch.tensor([40, 30, 20])
    for tasks in ([0, 1, 2], [1, 1, 3], [0, 2, 3], [2, 2, 2]):
        same_step(eager, compiled, run, x, lengths, torch.tensor(tasks))
        if tasks == [0, 1, 2]:
            first = graphs()
    assert graphs() == first  # the tasks present are the adapters' affair


def _batch_of_task(task: int, seed: int) -> dict:
    generator = torch.Generator().manual_seed(seed)
    return dict(
        speech=torch.randn(2, 6, FEATS, generator=generator),
        speech_lengths=torch.tensor([6, 5]),
        text=torch.tensor([[2, 3, 4], [5, 2, -1]]),
        text_lengths=torch.tensor([3, 2]),
        task_id=torch.tensor([task, task]),
    )


DDP_TASKS = (0, 2)  # each process' batch: one task each, task 1 in neither


def _ddp_two_updates(rank: int, out: str) -> None:
    """One of two CPU processes (gloo) training the adapter model under DistributedDataParallel, first
    told to look for unused parameters (ESPnet's ``unused_parameters: true``), then not."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    for find_unused in (True, False):
        store = f"file://{out}/store_{find_unused}"
        dist.init_process_group("gloo", init_method=store, rank=rank, world_size=2)
        try:
            model = DistributedDataParallel(adapter_asr_model(), find_unused_parameters=find_unused)
            batch = _batch_of_task(DDP_TASKS[rank], seed=rank)
            for _ in range(2):  # DDP notices a missing gradient when the next forward begins
                model.zero_grad(set_to_none=True)
                model(**batch)[0].backward()
            grads = {n: p.grad for n, p in model.module.named_parameters() if p.requires_grad}
            torch.save(grads, f"{out}/grads_{find_unused}_{rank}.pt")
        except RuntimeError as error:
            with open(f"{out}/error_{find_unused}_{rank}.txt", "w") as f:
                f.write(str(error))
        finally:
            dist.destroy_process_group()


def test_ddp_trains_adapters_with_unused_parameters_and_stops_without(tmp_path):
    # Why the adapter configs set unused_parameters: true. Each process holds one task's batch: told to
    # look, DDP averages each present task's adapter gradient over both processes and leaves the adapter
    # of the task no process held without a gradient (Adam skips it, as on one process); not told, it
    # stops at the second update, as a multi-GPU run of an adapter config would.
    torch.multiprocessing.spawn(_ddp_two_updates, args=(str(tmp_path),), nprocs=2)
    grads = [torch.load(tmp_path / f"grads_True_{rank}.pt") for rank in (0, 1)]
    alone = adapter_asr_model()  # rank 0's batch on one process, the same dropout draws
    for _ in range(2):
        alone.zero_grad(set_to_none=True)
        alone(**_batch_of_task(DDP_TASKS[0], seed=0))[0].backward()
    for name, param in alone.named_parameters():
        if not param.requires_grad:
            continue
        if ".per_task.1." in name:
            assert grads[0][name] is None and grads[1][name] is None, name
            continue
        torch.testing.assert_close(grads[0][name], grads[1][name], msg=name)
        if ".per_task.0." in name:  # task 2's rows are on the other process: half of rank 0's own
            torch.testing.assert_close(grads[0][name], param.grad / 2, msg=name)
    for rank in (0, 1):
        assert not (tmp_path / f"grads_False_{rank}.pt").exists()
        error = (tmp_path / f"error_False_{rank}.txt").read_text()
        assert "Expected to have finished reduction in the prior iteration" in error
