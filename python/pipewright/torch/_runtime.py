"""torch.distributed.pipelining's own time per compute call, measured: what a schedule's every action pays beyond
its layers' work (the profile's `runtime`, docs/profile-format.md). Times are seconds."""

from __future__ import annotations

import statistics
import time
from typing import Optional

import torch

from pipewright.torch._measure import Repeat

# The action list the runtime runs: forwards of every micro-batch, then full backwards and split ones (B, and I
# with W), as pipewright's schedules mix them, on one stage so that no transfer comes between two calls.
_MICROBATCHES = 8
_WIDTH = 8  # a Linear(8, 8): the layers' own work next to nothing


def _actions(microbatches: int) -> list:
    cells = [f"0F{i}" for i in range(microbatches)]
    for i in range(microbatches):
        cells += [f"0I{i}", f"0W{i}"] if i % 2 else [f"0B{i}"]
    return cells


def measure_runtime(group: tuple, where: torch.device, repeat: Repeat, csv_path: str) -> Optional[dict]:
    """Every rank calls it (the one-rank group it runs on is made by all); rank 0 measures. On the CPU: the median
    time from one compute call's module work to the next's, in a one-stage schedule of a Linear(8, 8) run by
    `_PipelineScheduleRuntime` from a compute-only CSV (the gap between calls: the schedule's loop, the loss, the
    stage's bookkeeping) plus the median time a forward call spends beyond its module's forward (its input and
    output handling). None elsewhere: on a GPU the host issues the next call while the device still computes,
    and its time is hidden unless the host is the bottleneck, which this does not measure."""
    import torch.distributed as dist

    one = dist.new_group([0])  # a collective of the default group: every rank makes it
    if group[0] != 0 or where.type != "cpu":
        return None
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    module = torch.nn.Linear(_WIDTH, _WIDTH)
    stage = PipelineStage(module, 0, 1, where, group=one)
    calls: list = []
    inner: list = []

    def timed_call(name: str) -> None:
        run = getattr(stage, name)

        def call(*args, **kwargs):
            start = time.perf_counter()
            out = run(*args, **kwargs)
            calls.append((name, start, time.perf_counter()))
            return out

        setattr(stage, name, call)

    for name in ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk"):
        timed_call(name)
    forward = module.forward

    def timed_forward(*args, **kwargs):
        start = time.perf_counter()
        out = forward(*args, **kwargs)
        inner.append(time.perf_counter() - start)
        return out

    module.forward = timed_forward
    with open(csv_path, "w") as f:
        f.write(",".join(_actions(_MICROBATCHES)) + "\n")
    schedule = _PipelineScheduleRuntime([stage], _MICROBATCHES, loss_fn=lambda out, target: out.sum())
    schedule._load_csv(csv_path, "compute_only")
    x = torch.randn(_MICROBATCHES, 2, _WIDTH, device=where)
    target = torch.zeros(_MICROBATCHES, device=where)
    gaps: list = []
    beyond: list = []
    steps = repeat.warmup + max(repeat.repeats, 20)
    for step in range(steps):
        calls.clear()
        inner.clear()
        schedule.step(x, target=target)
        if step < repeat.warmup:
            continue
        gaps += [calls[i + 1][1] - calls[i][2] for i in range(len(calls) - 1)]
        forwards = [end - start for name, start, end in calls if name == "forward_one_chunk"]
        beyond += [call - work for call, work in zip(forwards, inner)]
    dist.destroy_process_group(one)
    return {"name": f"torch.distributed.pipelining {torch.__version__}",
            "action_s": max(0.0, statistics.median(gaps) + statistics.median(beyond))}
