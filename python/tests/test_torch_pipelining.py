"""pipewright's exported schedules run by PyTorch's own pipelining runtime.

A small transformer built in PyTorch (embedding, decoder blocks of causal attention and an MLP, head) is
profiled with pipewright.torch.profile on two gloo processes (its layers and the gloo link), simulated by
pipewright at pp 2 and 4 with zero-bubble, V and interleaved schedules, exported as a PyTorch pipelining CSV
and run by torch.distributed.pipelining's _PipelineScheduleRuntime on gloo processes on the CPU. Each rank's
executed computations must be pipewright's, in pipewright's order; the measured step is printed beside the
predicted one (not asserted: the machine may be busy, and pp 4 puts 4 ranks on however many cores there are).

    PYTHONPATH=build/python:python .venv/bin/python3 -m pytest -q python/tests/test_torch_pipelining.py
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pipewright._core", reason="pipewright's compiled module (build/python) is needed to simulate")
import torch.distributed as dist  # noqa: E402

import pipewright  # noqa: E402
from pipewright.torch import small_gpt  # noqa: E402
from pipewright.torch.pipelining import (  # noqa: E402
    compare_orders,
    cpu_cluster,
    profile_on_gloo,
    read_schedule_csv,
    run_csv_schedule,
    stage_layers_from_simulation,
)

if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is needed", allow_module_level=True)

# Tiny on purpose: the whole file runs in well under 90 s on 2 cores.
SHAPE = small_gpt.GptShape(vocab=128, hidden=64, heads=4, ffn=256, seq=32, blocks=6)
MICRO_BATCH_SIZE, MICROBATCHES = 2, 8
BLOCKS = SHAPE.blocks
loss_fn = small_gpt.loss


# Module-level, so that the spawned rank processes can unpickle them.
def build_layers():
    return small_gpt.layers(SHAPE)


def make_batch():
    return small_gpt.token_batch(SHAPE, MICROBATCHES * MICRO_BATCH_SIZE)


def make_batch4():
    ids, target = make_batch()
    return ids[:4 * MICRO_BATCH_SIZE], target[:4 * MICRO_BATCH_SIZE]


def make_example():
    return make_batch()[0][:MICRO_BATCH_SIZE]


@pytest.fixture(scope="module")
def costs(tmp_path_factory):
    """The layers profiled by pipewright.torch.profile on 2 gloo ranks (layer times on one thread, the gloo
    link between the ranks): the profile, and the layers as pipewright's model with explicit costs."""
    folder = tmp_path_factory.mktemp("torch-pipelining")
    profile, model = folder / "profile.json", folder / "model.json"
    profile_on_gloo(build_layers, make_example, out=profile, model_out=model, name="tiny-torch-transformer",
                    repeats=5, min_time=0.02, warmup=2, link_sizes=[1024, 16384, 65536], link_repeats=5,
                    timeout_s=120)
    return {"model": str(model), "profile": str(profile), "folder": folder}


def _simulate(costs, csv_path, pp, schedule, vpp=1, **extra):
    # cpu_cluster, not "ideal": the ideal cluster makes every transfer free whatever the profile measured.
    return pipewright.simulate(model=costs["model"], profile=costs["profile"], cluster=cpu_cluster(), pp=pp,
                               vpp=vpp, microbatches=MICROBATCHES, schedule=schedule, export_csv=str(csv_path),
                               **extra)


def _plan(costs, csv_path, pp):
    """pipewright's fastest plan at pp (one pipeline, MICROBATCHES micro-batches), simulated and exported."""
    plan_path = csv_path.with_suffix(".plan.json")
    plans = pipewright.plan(model=costs["model"], profile=costs["profile"], cluster=cpu_cluster(), gpus=pp, pp=pp,
                            global_batch_size=MICROBATCHES, micro_batch_size=1, out=str(plan_path), threads=1)
    assert plans["plans"], "pipewright found no plan"
    return pipewright.simulate(plan=str(plan_path), export_csv=str(csv_path))


def _report(capsys, text):
    with capsys.disabled():
        print(text)


def test_reading_and_comparing_orders(tmp_path):
    """Composite cells run as their sub-actions in order; empty cells and communication are not computations;
    the first difference is named."""
    path = tmp_path / "s.csv"
    path.write_text("0F0,,(0F1;3B0)OVERLAP_F_B,0SEND_F1,0I0,0W0\r\n1F0,1RECV_F1,1B0\r\n")
    s = read_schedule_csv(path)
    assert s.compute == {0: ["0F0", "0F1", "3B0", "0I0", "0W0"], 1: ["1F0", "1B0"]}
    assert s.placement == {0: [0, 3], 1: [1]} and s.num_stages == 4 and s.format == "compute_comms"
    assert compare_orders(s, {0: ["0F0", "0F1", "3B0", "0I0", "0W0"], 1: ["1F0", "1B0"]}) is None
    diff = compare_orders(s, {0: ["0F0", "0F1", "3B0", "0W0", "0I0"], 1: ["1F0", "1B0"]})
    assert diff.startswith("rank 0, action 3: pipewright's schedule has 0I0, torch executed 0W0")
    assert "nothing more" in compare_orders(s, {0: s.compute[0], 1: ["1F0"]})


CASES = [
    (2, "plan", 1),  # whatever pipewright plans as fastest at pp 2 (zero bubble zb-h1 here)
    (2, "interleaved", 2),  # 4 stages, 2 a rank
    (2, "dualpipev", 1),  # V placement, forward and backward of two micro-batches in one (a;b)OVERLAP_F_B cell
    (4, "zb-v", 1),  # zero bubble V: 8 stages, rank r holds r and 7 - r
    (4, "interleaved", 2),  # 8 stages, 2 a rank, 4 ranks on the machine's cores
]


@pytest.mark.parametrize("pp,schedule,vpp", CASES, ids=[f"{s}-pp{pp}" for pp, s, _ in CASES])
def test_torch_runs_pipewrights_schedule(costs, tmp_path, capsys, pp, schedule, vpp):
    csv_path = tmp_path / f"{schedule}-pp{pp}.csv"
    if schedule == "plan":
        predicted = _plan(costs, csv_path, pp)
        schedule, vpp = f"plan: {predicted['schedule']}", predicted["vpp"]
    else:
        predicted = _simulate(costs, csv_path, pp, schedule, vpp)
    expected = read_schedule_csv(csv_path)
    assert expected.ranks == pp and expected.format == "compute_only"
    stage_layers = stage_layers_from_simulation(predicted)
    assert sorted(stage_layers) == list(range(expected.num_stages))

    result = run_csv_schedule(build_layers, csv_path, stage_layers, microbatches=MICROBATCHES,
                              make_batch=make_batch, loss_fn=loss_fn, warmup=1, steps=3, optimizer=True,
                              timeout_s=120)

    # Every step, warm-up included, ran pipewright's computations in pipewright's order on every rank.
    for step in range(len(next(iter(result.executed_steps.values())))):
        executed = {rank: steps[step] for rank, steps in result.executed_steps.items()}
        diff = compare_orders(expected, executed)
        assert diff is None, f"{schedule} pp {pp}, step {step}: {diff}"
    assert all(len(v) == len(expected.compute[r]) for r, v in result.executed.items())
    assert result.losses and all(l == l for l in result.losses)  # the last stage computed finite losses

    error = result.step_s / predicted["step_time_s"] - 1
    elsewhere = max(result.held_elsewhere(r) for r in range(result.ranks))
    _report(capsys, f"\n{schedule:>17} pp {pp} vpp {vpp} m {MICROBATCHES}: predicted step "
                    f"{predicted['step_time_s'] * 1e3:6.2f} ms, measured {result.step_s * 1e3:6.2f} ms "
                    f"(median of {', '.join(f'{t * 1e3:.1f}' for t in result.step_times_s)}), error {error:+.1%}; "
                    f"busiest rank's compute {max(s['busy_s'] for s in predicted['stages']) * 1e3:.1f} ms "
                    f"predicted, {max(result.busy_s(r) for r in range(result.ranks)) * 1e3:.1f} ms measured; "
                    f"cores elsewhere {elsewhere:.0%} ({pp} ranks, {os.cpu_count()} cores)")


def test_lowered_csv_with_sends_and_receives(costs, tmp_path, capsys):
    """A schedule with its communication (PyTorch's compute_comms format): pipewright reads it and writes it
    back lowered, with the WAIT_SEND_F / WAIT_SEND_B after every send and the REDUCE_GRAD torch 2.15 wants
    there; torch's loader takes the file as written and runs it in pipewright's order."""
    from torch.distributed.pipelining.schedules import _Action, _validate_send_waits

    hand = tmp_path / "1f1b-comms.csv"
    rows = [
        "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0F2,0SEND_F2,0RECV_B1,0B1,0F3,0SEND_F3,0RECV_B2,0B2,0RECV_B3,0B3",
        "1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1RECV_F2,1B1,1SEND_B1,1F2,1RECV_F3,1B2,1SEND_B2,1F3,1B3,1SEND_B3",
    ]
    hand.write_text("\r\n".join(rows) + "\r\n")
    exported = tmp_path / "pipewright-lowered.csv"
    predicted = pipewright.simulate(model=costs["model"], profile=costs["profile"], cluster=cpu_cluster(), pp=2,
                                    schedule_csv=str(hand), microbatches=4, export_csv=str(exported))
    lowered = read_schedule_csv(exported)
    assert lowered.format == "compute_comms" and lowered.has_send_waits
    written = {r: [_Action.from_str(c) for c in row if c] for r, row in lowered.cells.items()}
    _validate_send_waits(written)  # torch's own check of the file as written

    result = run_csv_schedule(build_layers, exported, stage_layers_from_simulation(predicted), microbatches=4,
                              make_batch=make_batch4, loss_fn=loss_fn, warmup=1, steps=2, timeout_s=120)
    diff = compare_orders(lowered, result.executed)
    assert diff is None, diff
    # The runtime ran the file's own actions, communication included, as written.
    assert {r: [str(a) for a in acts] for r, acts in written.items()} == result.lowered
    _report(capsys, f"\ncompute_comms 1f1b pp 2 m 4, as pipewright wrote it: predicted "
                    f"{predicted['step_time_s'] * 1e3:.2f} ms, measured {result.step_s * 1e3:.2f} ms")

