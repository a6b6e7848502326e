"""ESPnet2's own n-best checkpoint averaging (the trainer's last step), run on state dicts a test makes."""

import torch


def espnet_average(states: list[dict], out_dir) -> dict:
    """The state dict ESPnet's ``average_nbest_models`` writes from ``states`` (one per epoch)."""
    from espnet2.main_funcs.average_nbest_models import average_nbest_models
    from espnet2.train.reporter import Reporter

    reporter = Reporter()
    for epoch, state in enumerate(states, start=1):
        torch.save(state, out_dir / f"{epoch}epoch.pth")
        reporter.set_epoch(epoch)
        with reporter.observe("valid") as sub:
            sub.register({"acc": 0.1 * epoch})
            sub.next()
    average_nbest_models(out_dir, reporter, [("valid", "acc", "max")], nbest=len(states))
    return torch.load(out_dir / f"valid.acc.ave_{len(states)}best.pth", weights_only=True)
