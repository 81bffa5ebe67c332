"""Run a pipewright-exported schedule with PyTorch's own pipelining runtime and check what it executed.

pipewright writes a schedule as PyTorch pipelining's CSV (`pipewright simulate --export-csv FILE`: one row per
rank, one cell per action, "<stage><op><micro-batch>"). This module runs that file with
`torch.distributed.pipelining` on gloo processes on the CPU, the way a user's training script would:

- the model is a list of layer modules (e.g. embedding, blocks, head); pipewright's split says which layers
  each stage holds (`stage_layers`, from `simulate`'s JSON "stages"); each process builds the
  `PipelineStage`s of the stages its CSV row names (interleaved and V placements give a rank several);
- `_PipelineScheduleRuntime` loads the CSV with `_load_csv` (format `compute_only`, or `compute_comms` when the
  file has send and receive actions) and lowers it to sends and receives itself;
- warm-up steps, then timed steps; each rank's executed computations are recorded in order by wrapping its
  stages' `forward_one_chunk`, `backward_one_chunk` and `backward_weight_one_chunk` (torch is not modified);
- `compare_orders` checks the executed order against the CSV pipewright wrote and names the first difference.

    >>> from pipewright.torch.pipelining import run_csv_schedule, read_schedule_csv, compare_orders
    >>> result = run_csv_schedule(build_layers, "s.csv", stage_layers, microbatches=8,
    ...                           make_batch=make_batch, loss_fn=loss_fn)
    >>> compare_orders(read_schedule_csv("s.csv"), result.executed) is None
    True

`profile_on_gloo` runs pipewright.torch.profile in gloo processes (so the profile's link is the gloo link the
runtime uses).

Torch internals relied on (torch 2.15.0, torch/distributed/pipelining/):
  schedules.py  `_PipelineScheduleRuntime(stages, n_microbatches, loss_fn, ...)`, its `_load_csv(filename,
                format)`, `_prepare_schedule_with_comms(actions, format)`, `pipeline_order_with_comms`,
                `step(...)`; `_Action.from_str`, `_add_reduce_grad`, `_add_wait_send` (for a compute_comms
                file without WAIT_SEND_F / WAIT_SEND_B actions, which 2.15's loader requires);
  stage.py      `PipelineStage(submodule, stage_index, num_stages, device)` and its methods
                `forward_one_chunk(fwd_chunk_id, ...)`, `backward_one_chunk(bwd_chunk_id, loss=None,
                full_backward=True, last_backward=False)`, `backward_weight_one_chunk(bwd_chunk_id,
                last_backward=False)`, shadowed per instance to record the actions.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import socket
import statistics
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

# One action as pipewright and PyTorch spell it: <stage><op><micro-batch>.
_ACTION = re.compile(
    r"^(\d+)(WAIT_REDUCE_GRAD|WAIT_SEND_F|WAIT_SEND_B|REDUCE_GRAD|UNSHARD|RESHARD"
    r"|SEND_F|RECV_F|SEND_B|RECV_B|F|I|B|W)(\d*)$"
)
_COMPUTE_OPS = ("F", "I", "B", "W")
_COMM_OPS = ("SEND_F", "RECV_F", "SEND_B", "RECV_B", "WAIT_SEND_F", "WAIT_SEND_B")


# ----------------------------------------------------------------------------------------------------------
# The CSV


@dataclass(frozen=True)
class ScheduleCsv:
    """A PyTorch pipelining CSV as written: `cells[rank]` the row's cells (empty cells kept, as idle steps),
    `compute[rank]` the computations in the order the runtime runs them (a composite cell such as
    "(0F3;3B1)OVERLAP_F_B" gives its sub-actions in the order listed; communication, FSDP and empty cells
    dropped), `placement[rank]` the stages each rank holds, `format` "compute_only" or "compute_comms"."""

    path: str
    cells: dict[int, list[str]]
    compute: dict[int, list[str]]
    placement: dict[int, list[int]]
    num_stages: int
    microbatches: int
    format: str

    @property
    def ranks(self) -> int:
        return len(self.cells)

    @property
    def has_send_waits(self) -> bool:
        return any("WAIT_SEND_" in c for row in self.cells.values() for c in row)


def _split_cell(cell: str) -> list[tuple[int, str, int | None]]:
    """A cell's simple actions, (stage, op, micro-batch), composites expanded in order."""
    cell = cell.strip()
    if not cell:
        return []
    if cell.startswith("("):
        close = cell.find(")")
        if close < 0:
            raise ValueError(f"'{cell}': a composite action without its closing parenthesis")
        out = []
        for part in cell[1:close].split(";"):
            out += _split_cell(part)
        return out
    m = _ACTION.match(cell)
    if not m:
        raise ValueError(f"'{cell}' is not a PyTorch pipelining action (<stage><op><micro-batch>, e.g. 2F0)")
    stage, op, mb = m.groups()
    return [(int(stage), op, int(mb) if mb else None)]


def read_schedule_csv(path: str | os.PathLike) -> ScheduleCsv:
    """Parses a schedule CSV (pipewright's export or PyTorch's `_dump_csv`) with Python's csv reader, as
    PyTorch's `_load_csv` reads it."""
    path = os.fspath(path)
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    cells = {rank: list(row) for rank, row in enumerate(rows)}
    compute: dict[int, list[str]] = {}
    placement: dict[int, list[int]] = {}
    num_stages = 0
    microbatches = 0
    has_comms = False
    for rank, row in cells.items():
        compute[rank] = []
        stages: set[int] = set()
        for cell in row:
            for stage, op, mb in _split_cell(cell):
                num_stages = max(num_stages, stage + 1)
                if op in _COMM_OPS:
                    has_comms = True
                if op not in _COMPUTE_OPS:
                    continue
                stages.add(stage)
                microbatches = max(microbatches, (mb or 0) + 1)
                compute[rank].append(f"{stage}{op}{mb}")
        placement[rank] = sorted(stages)
    return ScheduleCsv(
        path=path,
        cells=cells,
        compute=compute,
        placement=placement,
        num_stages=num_stages,
        microbatches=microbatches,
        format="compute_comms" if has_comms else "compute_only",
    )


def compare_orders(expected: ScheduleCsv | Mapping[int, Sequence[str]],
                   executed: Mapping[int, Sequence[str]]) -> str | None:
    """None when every rank executed exactly the expected computations in the expected order; otherwise one
    line naming the first difference (lowest rank, then earliest position) with a little context."""
    want = expected.compute if isinstance(expected, ScheduleCsv) else expected
    ranks = sorted(set(want) | set(executed))
    for rank in ranks:
        a = list(want.get(rank, []))
        b = list(executed.get(rank, []))
        for i in range(max(len(a), len(b))):
            x = a[i] if i < len(a) else None
            y = b[i] if i < len(b) else None
            if x != y:
                lo = max(0, i - 3)
                return (f"rank {rank}, action {i}: pipewright's schedule has {x or 'nothing more'}, torch executed "
                        f"{y or 'nothing more'} (pipewright {','.join(a[lo:i + 3])} | torch {','.join(b[lo:i + 3])})")
    return None


def stage_layers_from_simulation(result: Mapping[str, Any]) -> dict[int, tuple[int, int]]:
    """stage -> (first layer, last layer), inclusive, from `pipewright simulate --json` ("stages"[].layers).
    Layer indices count the model's layers in order (a transformer's embedding 0, its blocks 1..L, the head
    L+1), which is the order of the layer list given to run_csv_schedule."""
    out = {}
    for s in result["stages"]:
        first, last = s["layers"]
        out[int(s["stage"])] = (int(first), int(last))
    return out


# ----------------------------------------------------------------------------------------------------------
# Running it


@dataclass
class RunResult:
    """What the runtime did. `executed[rank]`: the computations of the last timed step in execution order
    ("<stage><op><mb>", op F, I, B or W as PyTorch names them); `executed_steps[rank]`: the same for every
    step, warm-up included; `step_times_s`: each timed step's time (the slowest rank's, from a barrier to the
    end of its step); `step_s`: their median; `action_times[rank]`: (action, start_s, end_s) of the last timed
    step from the step's start; `compute_s[rank]` and `compute_cpu_s[rank]`: per step (warm-up included) the
    wall and CPU (thread) seconds of the rank's computations, CPU below wall meaning the core went to another
    thread or process meanwhile; `lowered[rank]`: the runtime's own lowered row (pipeline_order_with_comms) as
    text; `warmup_times_s` likewise for the warm-up steps; `losses`: mean loss per step (last stage)."""

    executed: dict[int, list[str]]
    executed_steps: dict[int, list[list[str]]]
    step_times_s: list[float]
    step_s: float
    warmup_times_s: list[float]
    action_times: dict[int, list[tuple[str, float, float]]]
    lowered: dict[int, list[str]]
    losses: list[float] = field(default_factory=list)
    ranks: int = 0
    threads_per_rank: int = 1
    warmup: int = 0
    compute_s: dict[int, list[float]] = field(default_factory=dict)
    compute_cpu_s: dict[int, list[float]] = field(default_factory=dict)

    def busy_s(self, rank: int) -> float:
        """The rank's computations' wall seconds in a step (median over the timed steps)."""
        timed = self.compute_s.get(rank, [])[self.warmup:]
        return statistics.median(timed) if timed else sum(e - s for _, s, e in self.action_times.get(rank, []))

    def held_elsewhere(self, rank: int) -> float:
        """The share of the rank's compute wall time over the timed steps that its thread did not run (its core
        held by another process or thread: other ranks sharing the cores, anything else running)."""
        wall = sum(self.compute_s.get(rank, [])[self.warmup:])
        cpu = sum(self.compute_cpu_s.get(rank, [])[self.warmup:])
        return max(0.0, 1.0 - cpu / wall) if wall > 0 else 0.0


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _instrument(stage, log: list):
    """Wraps one PipelineStage's compute entry points (instance attributes shadow the methods) so that every
    call appends (action, start, end, thread CPU seconds); the runtime calls exactly these for F, I/B and W."""
    import time as _t

    index = stage.stage_index
    forward = stage.forward_one_chunk
    backward = stage.backward_one_chunk
    backward_weight = stage.backward_weight_one_chunk

    def forward_one_chunk(fwd_chunk_id, *args, **kwargs):
        t, c = _t.perf_counter(), _t.thread_time()
        out = forward(fwd_chunk_id, *args, **kwargs)
        log.append((f"{index}F{fwd_chunk_id}", t, _t.perf_counter(), _t.thread_time() - c))
        return out

    def backward_one_chunk(bwd_chunk_id, loss=None, full_backward=True, last_backward=False):
        t, c = _t.perf_counter(), _t.thread_time()
        out = backward(bwd_chunk_id, loss=loss, full_backward=full_backward, last_backward=last_backward)
        op = "B" if full_backward else "I"
        log.append((f"{index}{op}{bwd_chunk_id}", t, _t.perf_counter(), _t.thread_time() - c))
        return out

    def backward_weight_one_chunk(bwd_chunk_id, last_backward=False):
        t, c = _t.perf_counter(), _t.thread_time()
        out = backward_weight(bwd_chunk_id, last_backward=last_backward)
        log.append((f"{index}W{bwd_chunk_id}", t, _t.perf_counter(), _t.thread_time() - c))
        return out

    stage.forward_one_chunk = forward_one_chunk
    stage.backward_one_chunk = backward_one_chunk
    stage.backward_weight_one_chunk = backward_weight_one_chunk


def _init_gloo(rank: int, world: int, port: int, timeout_s: float) -> None:
    """gloo over the loopback interface only: the rendezvous on 127.0.0.1, and gloo's own connections on lo
    (by default gloo binds the address the host name resolves to)."""
    import datetime

    import torch.distributed as dist

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))


def _worker(rank: int, world: int, port: int, spec: dict, results) -> None:
    try:
        import torch
        import torch.distributed as dist
        from torch.distributed.pipelining import PipelineStage
        from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

        torch.set_num_threads(spec["threads"])
        _init_gloo(rank, world, port, spec["timeout_s"])
        try:
            sched_csv: ScheduleCsv = spec["csv"]
            torch.manual_seed(spec["seed"])
            layers = list(spec["build_layers"]())
            stage_layers = spec["stage_layers"]
            mine = sched_csv.placement[rank]
            stages = []
            log: list = []
            for s in mine:
                first, last = stage_layers[s]
                submod = torch.nn.Sequential(*layers[first:last + 1])
                stage = PipelineStage(submod, s, sched_csv.num_stages, torch.device("cpu"))
                _instrument(stage, log)
                stages.append(stage)
            del layers
            runtime = _PipelineScheduleRuntime(stages, n_microbatches=spec["microbatches"], loss_fn=spec["loss_fn"],
                                               **spec["runtime_kwargs"])
            fmt = spec["format"] or sched_csv.format
            runtime._load_csv(sched_csv.path, format=fmt)
            lowered = [str(a) for a in runtime.pipeline_order_with_comms[rank]]
            torch.manual_seed(spec["seed"] + 1)
            inputs, target = spec["make_batch"]()
            params = [p for st in stages for p in st.submod.parameters()]
            optimizer = torch.optim.Adam(params, lr=1e-4) if spec["optimizer"] and params else None
            holds_last = (sched_csv.num_stages - 1) in mine
            holds_first = 0 in mine
            steps = spec["warmup"] + spec["steps"]
            durations, executed_steps, losses, compute, compute_cpu = [], [], [], [], []
            times = []
            for _ in range(steps):
                for p in params:
                    p.grad = None
                log.clear()
                step_losses: list = []
                dist.barrier()
                t0 = time.perf_counter()
                runtime.step(*((inputs,) if holds_first else ()), target=target if holds_last else None,
                             losses=step_losses if holds_last else None, return_outputs=False)
                if optimizer is not None:
                    optimizer.step()
                t1 = time.perf_counter()
                durations.append(t1 - t0)
                executed_steps.append([a for a, *_ in log])
                times = [(a, s - t0, e - t0) for a, s, e, _ in log]
                compute.append(sum(e - s for _, s, e, _ in log))
                compute_cpu.append(sum(c for *_, c in log))
                if step_losses:
                    losses.append(sum(float(x.detach()) for x in step_losses) / len(step_losses))
            dist.barrier()
            results.put((rank, {"durations": durations, "executed_steps": executed_steps, "times": times,
                                "lowered": lowered, "losses": losses, "compute": compute,
                                "compute_cpu": compute_cpu}))
        finally:
            dist.destroy_process_group()
    except BaseException:  # reported to the parent, which raises it
        results.put((rank, {"error": traceback.format_exc()}))


def run_csv_schedule(
    build_layers: Callable[[], Sequence[Any]],
    csv_path: str | os.PathLike,
    stage_layers: Mapping[int, tuple[int, int]] | Sequence[tuple[int, int]],
    *,
    microbatches: int | None = None,
    make_batch: Callable[[], tuple[Any, Any]],
    loss_fn: Callable[[Any, Any], Any],
    warmup: int = 2,
    steps: int = 5,
    threads_per_rank: int = 1,
    optimizer: bool = False,
    seed: int = 0,
    timeout_s: float = 300.0,
    format: str | None = None,
    runtime_kwargs: Mapping[str, Any] | None = None,
) -> RunResult:
    """Runs the schedule in `csv_path` with torch.distributed.pipelining's `_PipelineScheduleRuntime`, one gloo
    process per CSV row on 127.0.0.1 (a free port), and returns what each rank executed and the step time.

    build_layers: builds the whole model as a list of layer modules, the same in every process (called under
    torch.manual_seed(seed)); it and make_batch and loss_fn must be picklable (module-level functions): the
    processes are spawned. stage_layers: stage -> (first, last) layer index, inclusive
    (stage_layers_from_simulation). make_batch: returns (inputs, target) of the whole batch, split by the
    runtime into `microbatches` micro-batches (default: the CSV's). optimizer: also run an Adam step on each
    rank's parameters inside the timed step (pipewright's synchronous step counts one). format: the
    `_load_csv` format, detected from the file by default. runtime_kwargs: passed
    to _PipelineScheduleRuntime (e.g. defer_pp_recv=True)."""
    sched = read_schedule_csv(csv_path)
    if isinstance(stage_layers, Mapping):
        layers_of = {int(k): (int(v[0]), int(v[1])) for k, v in stage_layers.items()}
    else:
        layers_of = {i: (int(v[0]), int(v[1])) for i, v in enumerate(stage_layers)}
    missing = [s for s in range(sched.num_stages) if s not in layers_of]
    if missing:
        raise ValueError(f"stage_layers has no layers for stages {missing} of {sched.path}")
    spec = {
        "csv": sched,
        "build_layers": build_layers,
        "stage_layers": layers_of,
        "microbatches": microbatches or sched.microbatches,
        "make_batch": make_batch,
        "loss_fn": loss_fn,
        "warmup": warmup,
        "steps": steps,
        "threads": threads_per_rank,
        "optimizer": optimizer,
        "seed": seed,
        "timeout_s": timeout_s,
        "format": format,
        "runtime_kwargs": dict(runtime_kwargs or {}),
    }
    world = sched.ranks
    procs, results = _spawn(_worker, world, spec)
    got = _collect(procs, results, world, sched.path, timeout_s + 60)
    n_steps = warmup + steps
    per_step = [max(got[r]["durations"][i] for r in range(world)) for i in range(n_steps)]
    timed = per_step[warmup:]
    losses = next((got[r]["losses"] for r in range(world) if got[r]["losses"]), [])
    return RunResult(
        executed={r: got[r]["executed_steps"][-1] for r in range(world)},
        executed_steps={r: got[r]["executed_steps"] for r in range(world)},
        step_times_s=timed,
        step_s=statistics.median(timed) if timed else math.nan,
        warmup_times_s=per_step[:warmup],
        action_times={r: got[r]["times"] for r in range(world)},
        lowered={r: got[r]["lowered"] for r in range(world)},
        losses=losses,
        ranks=world,
        threads_per_rank=threads_per_rank,
        warmup=warmup,
        compute_s={r: got[r]["compute"] for r in range(world)},
        compute_cpu_s={r: got[r]["compute_cpu"] for r in range(world)},
    )


# ----------------------------------------------------------------------------------------------------------
# Profiling the layers where they will run


def _profile_worker(rank: int, world: int, port: int, spec: dict, results) -> None:
    try:
        import torch
        import torch.distributed as dist

        from pipewright.torch import profile

        torch.set_num_threads(spec["threads"])
        _init_gloo(rank, world, port, spec["timeout_s"])
        try:
            torch.manual_seed(spec["seed"])
            layers = list(spec["build_layers"]())
            example = spec["make_example"]()
            kwargs = dict(spec["kwargs"])
            document = profile(layers, example, out=spec["out"], model_out=spec["model_out"], **kwargs)
            results.put((rank, {"document": document if rank == 0 else None}))
        finally:
            dist.destroy_process_group()
    except BaseException:
        results.put((rank, {"error": traceback.format_exc()}))


def _collect(procs, results, world: int, what: str, timeout_s: float) -> dict[int, dict]:
    got: dict[int, dict] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < world:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: no result from ranks {sorted(set(range(world)) - set(got))}")
            if results.empty():
                dead = [r for r, p in enumerate(procs) if not p.is_alive() and r not in got and p.exitcode]
                if dead and results.empty():
                    raise RuntimeError(f"{what}: rank {dead[0]} exited with code {procs[dead[0]].exitcode}")
                time.sleep(0.02)
                continue
            rank, payload = results.get()
            if "error" in payload:
                raise RuntimeError(f"{what}: rank {rank} failed:\n{payload['error']}")
            got[rank] = payload
    finally:
        for p in procs:
            p.join(timeout=30 if len(got) == world else 2)
            if p.is_alive():
                p.kill()
                p.join()
    return got


def _spawn(target, world: int, spec: dict):
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    port = free_port()
    procs = [ctx.Process(target=target, args=(r, world, port, spec, results), daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    return procs, results


def profile_on_gloo(
    build_layers: Callable[[], Sequence[Any]],
    make_example: Callable[[], Any],
    *,
    out: str | os.PathLike,
    model_out: str | os.PathLike | None = None,
    ranks: int = 2,
    threads_per_rank: int = 1,
    seed: int = 0,
    timeout_s: float = 300.0,
    **profile_kwargs: Any,
) -> dict:
    """pipewright.torch.profile of the layers, called in `ranks` gloo processes on 127.0.0.1 as a pipeline's
    ranks would call it: rank 0 times the layers (on threads_per_rank threads, as each runtime rank runs) and
    the ranks measure the gloo send/receive link between them, which the profile records and pipewright then
    charges each stage-to-stage transfer. Writes `out` (and `model_out`: the layers as pipewright's model with
    explicit per-layer costs) and returns the profile. build_layers and make_example (one micro-batch's input
    of the first layer) must be picklable (module-level functions). profile_kwargs go to profile()."""
    spec = {
        "build_layers": build_layers,
        "make_example": make_example,
        "out": os.fspath(out),
        "model_out": os.fspath(model_out) if model_out is not None else None,
        "threads": threads_per_rank,
        "seed": seed,
        "timeout_s": timeout_s,
        "kwargs": profile_kwargs,
    }
    procs, results = _spawn(_profile_worker, ranks, spec)
    got = _collect(procs, results, ranks, "pipewright.torch.profile on gloo", timeout_s + 60)
    return got[0]["document"]


def split_of(stage_layers: Mapping[int, tuple[int, int]]) -> list[int]:
    """Layers per stage in stage order: pipewright's --split for the same placement of layers."""
    return [stage_layers[s][1] - stage_layers[s][0] + 1 for s in sorted(stage_layers)]


def cpu_cluster(name: str = "cpu-gloo") -> dict:
    """A pipewright cluster for ranks that are processes on one CPU machine: one node, links that a profile's
    measured link replaces (pipewright's "ideal" cluster makes every transfer free whatever the profile says).
    With a profile, its optimizer rate and link are used; the figures here only set what nothing measured."""
    link = {"bandwidth_bytes_per_s": 1e9, "latency_s": 5e-5}
    return {"name": name, "nodes": 1, "gpus_per_node": 64,
            "gpu": {"name": "cpu rank", "peak_tflops": 0.1, "memory_bytes": 1e12, "hbm_bytes_per_s": 2e10},
            "intra_node": dict(link), "inter_node": dict(link)}


def format_table(rows: Iterable[Sequence[Any]], header: Sequence[str]) -> str:
    """A plain text table (the benchmark's and the test's print)."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = lambda cells: " | ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
    out = io.StringIO()
    out.write(line(header) + "\n")
    out.write("-+-".join("-" * w for w in widths) + "\n")
    for r in rows:
        out.write(line(r) + "\n")
    return out.getvalue()


__all__ = [
    "RunResult",
    "ScheduleCsv",
    "compare_orders",
    "cpu_cluster",
    "format_table",
    "free_port",
    "profile_on_gloo",
    "read_schedule_csv",
    "run_csv_schedule",
    "split_of",
    "stage_layers_from_simulation",
]
