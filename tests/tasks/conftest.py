"""Fixtures of the task tests: one torch thread, ESPnet2's training options for tiny CPU runs."""

import os

import pytest
import torch

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture()
def tiny_run_options():
    """Options shared by the tiny trainings: CPU, in-process data loading, no plots, one kept model."""
    return [
        "--ngpu",
        "0",
        "--num_workers",
        "0",
        "--seed",
        "0",
        "--use_tensorboard",
        "false",
        "--use_matplotlib",
        "false",
        "--num_att_plot",
        "0",
        "--keep_nbest_models",
        "1",
        "--log_interval",
        "1",
    ]
