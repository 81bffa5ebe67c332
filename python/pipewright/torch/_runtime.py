"""torch.distributed.pipelining's own time, measured: what a schedule's every compute call pays beyond its layers'
work, and what posting a send costs the rank's thread (the profile's `runtime`, docs/profile-format.md). Times
are seconds."""

from __future__ import annotations

import statistics
import time
from typing import Optional

import torch

from pipewright.torch._measure import Repeat

# The action lists the runtime runs, on stages of a Linear(8, 8) so that the layers' own work is next to nothing:
# forwards of every micro-batch, then full backwards and split ones (B, and I with W), as pipewright's schedules
# mix them.
_MICROBATCHES = 8
_WIDTH = 8
_LEAST_TIMED_STEPS = 20


def _actions(stage: int, microbatches: int, split: bool) -> list:
    cells = [f"{stage}F{i}" for i in range(microbatches)]
    for i in range(microbatches):
        cells += [f"{stage}I{i}", f"{stage}W{i}"] if split and i % 2 else [f"{stage}B{i}"]
    return cells


class _TimedStage:
    """A PipelineStage of a Linear(8, 8) whose compute calls (forward_one_chunk, backward_one_chunk,
    backward_weight_one_chunk) and module forwards are timed as the runtime makes them."""

    def __init__(self, stage_index: int, stages: int, where: torch.device, group):
        from torch.distributed.pipelining import PipelineStage

        self.module = torch.nn.Linear(_WIDTH, _WIDTH).to(where)
        self.stage = PipelineStage(self.module, stage_index, stages, where, group=group)
        self.calls: list = []  # (name, start, end)
        self.inner: list = []  # each module forward's seconds
        for name in ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk"):
            self._time_call(name)
        forward = self.module.forward

        def timed_forward(*args, **kwargs):
            start = time.perf_counter()
            out = forward(*args, **kwargs)
            self.inner.append(time.perf_counter() - start)
            return out

        self.module.forward = timed_forward

    def _time_call(self, name: str) -> None:
        run = getattr(self.stage, name)

        def call(*args, **kwargs):
            start = time.perf_counter()
            out = run(*args, **kwargs)
            self.calls.append((name, start, time.perf_counter()))
            return out

        setattr(self.stage, name, call)

    def gaps(self, between: Optional[str] = None) -> list:
        """Seconds from each call's end to the next call's start; with `between`, only where both are that call."""
        c = self.calls
        return [c[i + 1][1] - c[i][2] for i in range(len(c) - 1)
                if between is None or c[i][0] == c[i + 1][0] == between]


def _run(timed: _TimedStage, rows: list, stage_index: int, where: torch.device, repeat: Repeat, csv_path: str,
         on_step) -> None:
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    with open(csv_path, "w") as f:
        f.write("\n".join(",".join(row) for row in rows) + "\n")
    schedule = _PipelineScheduleRuntime([timed.stage], _MICROBATCHES, loss_fn=lambda out, target: out.sum())
    schedule._load_csv(csv_path, "compute_only")
    x = torch.randn(_MICROBATCHES, 2, _WIDTH, device=where)
    target = torch.zeros(_MICROBATCHES, device=where)
    for step in range(repeat.warmup + max(repeat.repeats, _LEAST_TIMED_STEPS)):
        timed.calls.clear()
        timed.inner.clear()
        if len(rows) == 1:  # the first stage is the last: it takes the input and the target
            schedule.step(x, target=target)
        elif stage_index == 0:
            schedule.step(x)
        else:
            schedule.step(target=target)
        if step >= repeat.warmup:
            on_step()


def measure_runtime(group: tuple, where: torch.device, repeat: Repeat, csv_path: str) -> Optional[dict]:
    """Every rank calls it (the groups it runs in are made by all); rank 0 returns the measurement, the others
    None. On the CPU only: on a GPU the host issues the next call while the device still computes, and its time
    shows only where the host is the bottleneck, which this does not measure.

    action_s: one stage run alone by `_PipelineScheduleRuntime` from a compute-only CSV, no transfer between two
    calls: the median time from one compute call's end to the next's start (the schedule's loop, the loss, the
    stage's bookkeeping) plus the median time a forward call spends beyond its module's forward (its inputs and
    outputs handled).
    transfer_s: two stages on ranks 0 and 1, GPipe: on rank 0 every forward is followed by the send of its
    output, posted by the runtime from the rank's thread before the next forward; the median gap between two
    forwards there, less the one-stage gap, is the time one send's posting costs the rank (a receive is posted
    the same way and charged the same)."""
    import torch.distributed as dist

    rank = group[0]
    one = dist.new_group([0])  # collectives of the default group: every rank makes both
    pair = dist.new_group([0, 1])
    if where.type != "cpu" or rank > 1:
        return None
    gaps, beyond, sending = [], [], []
    if rank == 0:
        alone = _TimedStage(0, 1, where, one)

        def after_alone_step():
            gaps.extend(alone.gaps())
            forwards = [end - start for name, start, end in alone.calls if name == "forward_one_chunk"]
            beyond.extend(call - work for call, work in zip(forwards, alone.inner))

        _run(alone, [_actions(0, _MICROBATCHES, split=True)], 0, where, repeat, csv_path, after_alone_step)
        dist.destroy_process_group(one)
    two = _TimedStage(rank, 2, where, pair)
    rows = [_actions(s, _MICROBATCHES, split=False) for s in (0, 1)]
    _run(two, rows, rank, where, repeat, csv_path,
         lambda: sending.extend(two.gaps("forward_one_chunk")))
    dist.destroy_process_group(pair)
    if rank != 0:
        return None
    gap = statistics.median(gaps)
    return {"name": f"torch.distributed.pipelining {torch.__version__}",
            "action_s": max(0.0, gap + statistics.median(beyond)),
            "transfer_s": max(0.0, statistics.median(sending) - gap)}
