"""The layers measured: F, B and W timed apart (B and W as zero-bubble schedules split backward), the bytes
F keeps for B and W and B keeps for W, and Adam's rate per parameter. Times are seconds, sizes bytes."""

from __future__ import annotations

import collections
import copy
import glob
import math
import os
import time
import weakref
from typing import Any, Callable, Optional

import torch
from torch.autograd.graph import GradientEdge, get_gradient_edge


# The C++ profiler's settings (profiler/repeat.hpp, profiler/cpu_profiler.hpp): the measurements are taken
# in this many turns over the layers, so that a machine that slows down for a while moves them all alike.
_ROUNDS = 5
# The most Adam state (value, gradient, two moments) the optimizer step is timed over: a stage's state is
# past every cache long before this.
_OPTIMIZER_STATE_CAP_BYTES = 256 * 1024 * 1024
# The bytes a cache flush writes: twice the device's last-level cache, within these bounds; a device whose
# cache is unknown gets _FLUSH_UNKNOWN_BYTES.
_FLUSH_MIN_BYTES = 8 * 1024 * 1024
_FLUSH_MAX_BYTES = 512 * 1024 * 1024
_FLUSH_UNKNOWN_BYTES = 64 * 1024 * 1024
_CPU_CACHES = "/sys/devices/system/cpu/cpu0/cache"


# --- tensors in nested inputs and outputs ----------------------------------------------------------------


def tensors(value: Any) -> list:
    """The tensors in a tensor, or a tuple, list or dict of them (nested), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors(v)]
    return []


def _map_tensors(value: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (tuple, list)):
        mapped = [_map_tensors(v, fn) for v in value]
        return type(value)(*mapped) if hasattr(value, "_fields") else type(value)(mapped)
    if isinstance(value, dict):
        return type(value)((k, _map_tensors(v, fn)) for k, v in value.items())
    return value


def _normal(like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return torch.randn(like.shape, generator=generator, dtype=like.dtype, device=like.device)


def _leaf(t: torch.Tensor) -> torch.Tensor:
    """A fresh leaf of the same storage: floating inputs get a gradient (B's target), others (token ids) none."""
    leaf = t.detach()
    return leaf.requires_grad_() if leaf.is_floating_point() or leaf.is_complex() else leaf


def state(layer: torch.nn.Module) -> list:
    return list(layer.parameters()) + list(layer.buffers())


def _trainable(layer: torch.nn.Module) -> list:
    return [p for p in layer.parameters() if p.requires_grad]


def _storage_key(t: torch.Tensor) -> tuple:
    """The memory a tensor holds (its storage, whatever view of it) and that memory's bytes."""
    try:
        storage = t.untyped_storage()
        return (str(t.device), storage.data_ptr()), storage.nbytes()
    except (RuntimeError, NotImplementedError):  # sparse, nested and other tensors without one storage
        return ("tensor", id(t)), t.numel() * t.element_size()


def _unique_bytes(tensors: list) -> int:
    seen = {}
    for t in tensors:
        key, nbytes = _storage_key(t)
        seen[key] = nbytes
    return sum(seen.values())


def _parameter_bytes(layer: torch.nn.Module) -> int:
    # parameters() yields a parameter shared by two submodules once: tied weights count once.
    return sum(p.numel() * p.element_size() for p in layer.parameters())


def placed(layers: list, example_input: Any, where: torch.device, dtype: Optional[torch.dtype]) -> tuple:
    """The layers and the input on `where` and in `dtype`: copies where anything must move or be cast (the
    user's own layers stay as they are; one copy of them all, so that weights tied across layers stay
    tied), else the layers themselves."""

    def placed(t: torch.Tensor) -> bool:
        return t.device == where and (dtype is None or not t.is_floating_point() or t.dtype == dtype)

    if not all(placed(t) for layer in layers for t in state(layer)):
        layers = [layer.to(where) for layer in copy.deepcopy(layers)]
        if dtype is not None:
            layers = [layer.to(dtype) for layer in layers]

    def cast(t: torch.Tensor) -> torch.Tensor:
        t = t.to(where)
        return t.to(dtype) if dtype is not None and t.is_floating_point() else t

    return layers, _map_tensors(example_input, cast)


# --- timing ----------------------------------------------------------------------------------------------


class _Clock:
    """Marks between phases: the host's monotonic clock on CPUs; CUDA events on GPUs, where the host only
    queues the kernels, read after one synchronize at the end of a run."""

    def __init__(self, where: torch.device):
        self.cuda = where.type == "cuda"
        self.where = where

    def start(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.where)  # the previous run's kernels are not this run's

    def mark(self) -> Any:
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record(torch.cuda.current_stream(self.where))  # the profiled device's, whichever is current
        return event

    def seconds(self, pairs: list) -> list:
        """Each (start, end) pair's seconds."""
        if not self.cuda:
            return [b - a for a, b in pairs]
        torch.cuda.synchronize(self.where)
        return [a.elapsed_time(b) * 1e-3 for a, b in pairs]


def last_level_cache_bytes(where: torch.device, cpu_caches: str = _CPU_CACHES) -> Optional[int]:
    """The largest cache of the device a layer runs on: a GPU's L2; on a CPU the largest cache of the first
    core as Linux's sysfs lists it under `cpu_caches` (one instance of it: the L3 a core's cluster shares).
    None if unknown."""
    if where.type == "cuda":
        return int(getattr(torch.cuda.get_device_properties(where), "L2_cache_size", 0)) or None
    sizes = []
    for index in glob.glob(os.path.join(cpu_caches, "index*", "size")):
        try:
            with open(index) as f:
                text = f.read().strip()
        except OSError:
            continue
        scale = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(text[-1:].upper(), 1)
        digits = text[:-1] if scale != 1 else text
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else None


class CacheFlush:
    """Writes a buffer of twice the device's last-level cache, so that what runs next finds its data in
    memory rather than in a cache: an optimizer step, which in a run comes after a whole iteration's passes."""

    def __init__(self, where: torch.device, cpu_caches: str = _CPU_CACHES):
        self.buffer = torch.zeros(self.bytes_for(last_level_cache_bytes(where, cpu_caches)), dtype=torch.uint8,
                                  device=where)

    @staticmethod
    def bytes_for(cache: Optional[int]) -> int:
        """What a flush writes for a last-level cache of `cache` bytes (None: unknown)."""
        if cache is None:
            return _FLUSH_UNKNOWN_BYTES
        return min(max(2 * cache, _FLUSH_MIN_BYTES), _FLUSH_MAX_BYTES)

    def __call__(self) -> None:
        self.buffer.add_(1)


class Repeat:
    """How long each measurement repeats (profiler/repeat.hpp's ProfileOptions and repeat_interleaved)."""

    def __init__(self, repeats: int, max_repeats: int, warmup: int, min_time: float, rounds: int = _ROUNDS):
        self.repeats, self.max_repeats, self.warmup = repeats, max_repeats, warmup
        self.min_time, self.rounds = min_time, rounds

    def interleaved(self, runs: list, phases: int) -> list:
        """Each run (returning its `phases` phases' seconds) past the warm-up, in turns: in each turn, each
        run once untimed (its code paths and allocations warm after the others ran), then timed until its share
        of the repetitions and of the time is reached: the time a run's repetitions took on the host, their
        untimed parts included (the forward a one-pass backward needs), as Repeat.passes counts it. The samples
        of each run and phase."""
        samples = [[[] for _ in range(phases)] for _ in runs]
        spent = [0.0] * len(runs)
        for run in runs:
            for _ in range(self.warmup):
                run()
        for turn in range(1, self.rounds + 1):
            # Shares rounded up, so that the turns together reach at least the totals asked for.
            least = -(-self.repeats * turn // self.rounds)
            most = max(least, self.max_repeats * turn // self.rounds)
            min_time = self.min_time * turn / self.rounds
            for k, run in enumerate(runs):
                if self.rounds > 1:
                    run()
                mine = samples[k]
                while len(mine[0]) < most and (len(mine[0]) < least or spent[k] < min_time):
                    start = time.perf_counter()
                    for phase, seconds in zip(mine, run()):
                        phase.append(seconds)
                    spent[k] += time.perf_counter() - start
        return samples

    def passes(self, run_pass: Callable[[], list], runs: int, phases: int) -> list:
        """Passes (each returning every run's `phases` phases' seconds) past `warmup` untimed ones, until at
        least `repeats` passes and `min_time` seconds a run on average (the passes' host time over the runs),
        at most `max_repeats` passes. The samples of each run and phase, as interleaved()'s."""
        samples = [[[] for _ in range(phases)] for _ in range(runs)]
        for _ in range(self.warmup):
            run_pass()
        spent, done = 0.0, 0
        while done < self.max_repeats and (done < self.repeats or spent < self.min_time * runs):
            start = time.perf_counter()
            for mine, seconds in zip(samples, run_pass()):
                for phase, t in zip(mine, seconds):
                    phase.append(t)
            spent += time.perf_counter() - start
            done += 1
        return samples

    def alone(self, run: Callable[[], list], phases: int) -> list:
        one_turn = Repeat(self.repeats, self.max_repeats, self.warmup, self.min_time, rounds=1)
        return one_turn.interleaved([run], phases)[0]


def timing(samples: list) -> dict:
    """profiler/cpu_profiler.cpp's timing_of: the median (the mean of the middle two for an even count),
    p10 and p90 of the samples."""
    s = sorted(samples)
    n = len(s)
    if n == 0:
        return {"median_s": 0.0, "p10_s": 0.0, "p90_s": 0.0, "repetitions": 0}

    def at(q):  # lround: halves away from zero
        return s[int(math.floor(q * (n - 1) + 0.5))]

    median = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    return {"median_s": median, "p10_s": at(0.1), "p90_s": at(0.9), "repetitions": n}


# --- B and W apart ---------------------------------------------------------------------------------------


def _parents(roots: list) -> dict:
    """Each node of the backward graph below `roots` with the nodes that pass it gradients."""
    parents = collections.defaultdict(list)
    seen = set(roots)
    queue = collections.deque(roots)
    while queue:
        node = queue.popleft()
        for child, _ in node.next_functions:
            if child is None:
                continue
            parents[child].append(node)
            if child not in seen:
                seen.add(child)
                queue.append(child)
    return parents


class _Backward:
    """One forward's backward split as zero-bubble schedules split it (torch.distributed.pipelining's
    stage_backward_input and stage_backward_weight do the same): B computes the gradient of the layer's
    input only, keeping the gradients that reach the nodes where the weights' paths leave the input's; W
    then computes the weights' gradients from those, without going through B's work again. A layer whose
    input takes no gradient (token ids) has no B; W is then its whole backward."""

    def __init__(self, roots: list, dys: list, inputs: list, params: list):
        self.roots, self.dys, self.inputs, self.params = roots, dys, inputs, params
        self.has_input_grad, self.has_weight_grad = bool(roots and inputs), bool(roots and params)
        parents = _parents([get_gradient_edge(y).node for y in roots])
        # The nodes between the input and the output: B's path.
        on_input_path = set()
        queue = collections.deque(get_gradient_edge(x).node for x in inputs)
        while queue:
            node = queue.popleft()
            if node not in on_input_path:
                on_input_path.add(node)
                queue.extend(parents[node])
        self.groups = _weight_groups(params, parents, on_input_path)
        # An output whose gradient reaches a weight without passing B's path (a branch of its own, or every
        # output of a layer whose input takes no gradient) is where W starts for that weight.
        starts = {node for group in self.groups for node in group["starts"]}
        self.output_edges = collections.defaultdict(list)
        for y, dy in zip(roots, dys):
            edge = get_gradient_edge(y)
            if edge.node in starts and edge.node not in on_input_path:
                self.output_edges[edge.node].append((edge, dy))
        self.joins = starts & on_input_path
        self.kept = {}

    def full(self) -> tuple:
        """B and W as one backward pass (a BW action; what torch.distributed.pipelining's stage_backward
        runs): the gradients of the inputs and the weights in one autograd call."""
        wanted = self.inputs + self.params
        if not self.roots or not wanted:
            return ()
        grads = torch.autograd.grad(self.roots, wanted, self.dys, allow_unused=True)
        self.roots = self.dys = None
        return grads

    def input_grad(self) -> tuple:
        """B: the inputs' gradients."""
        grads = ()
        if self.has_input_grad:
            handles = [node.register_prehook(self._keeper(node)) for node in self.joins]
            try:
                grads = torch.autograd.grad(self.roots, self.inputs, self.dys, retain_graph=True, allow_unused=True)
            finally:
                for h in handles:
                    h.remove()
        # The outputs' side of the graph is not needed any more: only what W starts from holds on to it.
        self.roots = self.dys = None
        return grads

    def _keeper(self, node) -> Callable:
        def keep(grad_outputs):
            self.kept[node] = grad_outputs

        return keep

    def kept_gradients(self) -> list:
        kept = [g for grads in self.kept.values() for g in grads if g is not None]
        return kept + [dy for edges in self.output_edges.values() for _, dy in edges]

    def weight_grad(self) -> tuple:
        """W: the weights' gradients (None for a weight the output does not depend on). One autograd call
        per group of weights that share where they start, as torch's stage_backward_weight: one call for all
        would make every start's path to the starts below it needed, and redo B's input gradients there."""
        found = {}
        if self.has_weight_grad:
            for group in self.groups:
                edges, grads = self._starts(group["starts"])
                if not edges:
                    continue
                # Where one start lies below another, the gradient B left there is already whole: the clamp
                # keeps W from adding the upper one's share to it a second time.
                handles = []
                if len(edges) > 1:
                    handles = [self._clamp(node) for node in group["starts"] if node in self.kept]
                try:
                    weight_grads = torch.autograd.grad(edges, group["params"], grads, allow_unused=True)
                finally:
                    for h in handles:
                        h.remove()
                found.update(zip(map(id, group["params"]), weight_grads))
        self.kept, self.output_edges = {}, {}
        return tuple(found.get(id(p)) for p in self.params)

    def _starts(self, nodes: set) -> tuple:
        edges, grads = [], []
        for node in nodes:
            for i, g in enumerate(self.kept.get(node, ())):
                if g is not None:
                    edges.append(GradientEdge(node, i))
                    grads.append(g)
            for edge, dy in self.output_edges.get(node, ()):
                edges.append(edge)
                grads.append(dy)
        return edges, grads

    def _clamp(self, node):
        kept = self.kept[node]
        return node.register_prehook(lambda _: kept)


def _weight_groups(params: list, parents: dict, on_input_path: set) -> list:
    """The weights grouped by where W starts for them: going up from a weight toward the outputs, the first
    nodes on B's path, or an output reached without meeting it. Weights that share a start are one group."""
    groups, group_of = [], {}
    for p in params:
        starts, seen = set(), set()
        queue = collections.deque([get_gradient_edge(p).node])
        while queue:
            node = queue.popleft()
            if node in seen:
                continue
            seen.add(node)
            if node in on_input_path or not parents[node]:
                starts.add(node)
            if node not in on_input_path:
                queue.extend(parents[node])
        group = {"params": [p], "starts": starts}
        joined = {id(group_of[s]): group_of[s] for s in starts if s in group_of}
        for other in joined.values():
            group["params"] += other["params"]
            group["starts"] |= other["starts"]
        groups = [g for g in groups if id(g) not in joined] + [group]
        for s in group["starts"]:
            group_of[s] = group
    return groups


# --- one layer -------------------------------------------------------------------------------------------


class _Layer:
    """One layer, its input (the previous layer's output) and its output gradients: runs F, B and W once."""

    def __init__(self, layer: torch.nn.Module, x: Any, generator: torch.Generator):
        self.layer, self.x = layer, x
        self.params = _trainable(layer)
        with torch.no_grad():
            y = layer(x)
        self.output = y
        # Random gradients of the floating outputs (a scalar loss gets 1, as autograd's own seed).
        self.dys = [
            torch.ones_like(t) if t.dim() == 0 else _normal(t, generator)
            for t in tensors(y)
            if t.is_floating_point()
        ]

    def start(self) -> tuple:
        """The layer's input for one run and the leaves B differentiates by. Inside a pipeline a layer's input
        is the last layer's output, not a leaf: a copy of the leaf stands for it, so that a layer that
        starts in place (ReLU(inplace=True)) runs as there, and the input kept between runs stays as it is."""
        leaves = _map_tensors(self.x, _leaf)
        x = _map_tensors(leaves, lambda t: t.clone() if t.requires_grad else t)
        return x, [t for t in tensors(leaves) if t.requires_grad]

    def backward_of(self, y: Any, inputs: list) -> _Backward:
        roots, dys = [], []
        floating = [t for t in tensors(y) if t.is_floating_point()]
        for t, dy in zip(floating, self.dys):
            if t.requires_grad:
                roots.append(t)
                dys.append(dy)
        return _Backward(roots, dys, inputs, self.params)

    def timed(self, clock: _Clock) -> list:
        """F, B and W once, one after the other, then F again (not timed) and B and W as one pass
        (repeated timing: the layer's weights stay in the caches)."""
        x, inputs = self.start()
        clock.start()
        t0 = clock.mark()
        y = self.layer(x)
        t1 = clock.mark()
        backward = self.backward_of(y, inputs)  # finding where W starts is the profiler's work, not timed
        del y
        t2 = clock.mark()
        backward.input_grad()
        t3 = clock.mark()
        backward.weight_grad()
        t4 = clock.mark()
        x, inputs = self.start()
        whole = self.backward_of(self.layer(x), inputs)
        t5 = clock.mark()
        whole.full()
        t6 = clock.mark()
        return self.phases(backward, *clock.seconds([(t0, t1), (t2, t3), (t3, t4), (t5, t6)]))

    @staticmethod
    def phases(backward: "_Backward", f: float, b: float, w: float, bw: float) -> list:
        """[F, B, W, B and W as one pass]. No input gradient (token ids) or no weights: that phase does
        nothing, and is 0, not the clock's noise."""
        has_b, has_w = backward.has_input_grad, backward.has_weight_grad
        return [f, b if has_b else 0.0, w if has_w else 0.0, bw if has_b or has_w else 0.0]

    def bytes(self) -> dict:
        """What F keeps for B and W (the tensors autograd saves, each storage once, less the layer's own
        weights and buffers), what B keeps for W (the saved tensors W's part of the graph still holds and
        the gradients W starts from) and the output's bytes."""
        own = {_storage_key(t)[0] for t in state(self.layer)}
        saved = []

        def pack(t):
            packed = t.detach()  # a detached alias: saving the output itself would tie it to its own node
            key, nbytes = _storage_key(t)
            if key not in own:
                saved.append((key, nbytes, weakref.ref(packed)))
            return packed

        x, inputs = self.start()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = self.layer(x)
        del x  # an in-place layer's input is its output: it must not outlive B here either
        activation = sum(dict((key, nbytes) for key, nbytes, _ in saved).values())
        output = sum(t.numel() * t.element_size() for t in tensors(y))
        backward = self.backward_of(y, inputs)
        del y
        backward.input_grad()
        alive = dict((key, nbytes) for key, nbytes, ref in saved if ref() is not None)
        kept_for_w = sum(alive.values()) + _unique_bytes(backward.kept_gradients())
        backward.weight_grad()
        return {"activation_bytes": activation, "weight_grad_bytes": kept_for_w, "output_bytes": output}


def _pass_groups(sizes: list, budget_bytes: float) -> list:
    """The layers' indices (their _Layer.bytes() in `sizes`) in runs of consecutive layers whose F keeps at
    most budget_bytes for B and W together (each run at least one layer): what one pass holds at once."""
    groups, held = [[]], 0.0
    for k, size in enumerate(sizes):
        kept = size["activation_bytes"] + size["weight_grad_bytes"]
        if groups[-1] and held + kept > budget_bytes:
            groups.append([])
            held = 0.0
        groups[-1].append(k)
        held += kept
    return groups


def _pass_budget_bytes(where: torch.device) -> float:
    """What a pass may hold: half the GPU's free memory, a quarter of the host's available memory."""
    if where.type == "cuda":
        return torch.cuda.mem_get_info(where)[0] / 2
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 4
    except (ValueError, OSError):
        return 4.0 * 1024**3


def _one_pass(measured: list, groups: list, clock: _Clock) -> list:
    """One pass over the layers as a pipeline runs them, group by group: F of each layer in order, each on
    its predecessor's output as the profile measured it, then B of each in reverse order, then W; then F of
    each again (not timed) and B and W of each as one pass, in reverse order. Each layer's phases so run after
    the other layers' phases, as inside a stage. Each layer's [F, B, W, B and W as one pass] seconds."""
    seconds = [[0.0] * 4 for _ in measured]

    def forwards(group: list, marks: Optional[list]) -> dict:
        """F of each layer in order, each timed into `marks` (None: not timed); each layer's backward."""
        backward = {}
        for k in group:
            x, inputs = measured[k].start()
            t0 = clock.mark() if marks is not None else None
            y = measured[k].layer(x)
            if marks is not None:
                marks.append((k, 0, t0, clock.mark()))
            backward[k] = measured[k].backward_of(y, inputs)  # the profiler's work, not timed
            del y
        return backward

    def backwards(group: list, marks: list, phase: int, run: Callable, backward: dict) -> None:
        for k in reversed(group):
            t0 = clock.mark()
            run(backward[k])
            marks.append((k, phase, t0, clock.mark()))

    for group in groups:
        clock.start()
        marks: list = []
        split = forwards(group, marks)
        backwards(group, marks, 1, _Backward.input_grad, split)
        backwards(group, marks, 2, _Backward.weight_grad, split)
        backwards(group, marks, 3, _Backward.full, forwards(group, None))
        for (k, phase, _, _), t in zip(marks, clock.seconds([(a, b) for *_, a, b in marks])):
            seconds[k][phase] = t
        for k in group:
            seconds[k] = _Layer.phases(split[k], *seconds[k])
    return seconds


def measure_layers(layers: list, example_input: Any, where: torch.device, repeat: Repeat,
                   timing: str = "pass") -> list:
    """Each layer's F, B and W samples and bytes, on its predecessor's output, timed in passes over the
    layers (`timing` "pass", Repeat.passes) or each layer again and again on its own ("repeated",
    Repeat.interleaved). The user's buffers (running statistics) and random state are as they were
    afterwards: profiling trains nothing."""
    generator = torch.Generator(device=where).manual_seed(0)
    clock = _Clock(where)
    buffers = [(b, b.detach().clone()) for layer in layers for b in layer.buffers()]
    devices = [where.index] if where.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices), torch.enable_grad():
            measured, x = [], example_input
            for layer in layers:
                one = _Layer(layer, x, generator)
                measured.append(one)
                x = one.output
            sizes = [one.bytes() for one in measured]
            if timing == "pass":
                groups = _pass_groups(sizes, _pass_budget_bytes(where))
                samples = repeat.passes(lambda: _one_pass(measured, groups, clock), len(measured), 4)
            else:
                samples = repeat.interleaved([lambda one=one: one.timed(clock) for one in measured], 4)
    finally:
        with torch.no_grad():
            for b, value in buffers:
                b.copy_(value)
    return [
        {
            "layer": one.layer,
            "samples": phases,
            "parameter_bytes": _parameter_bytes(one.layer),
            **size,
        }
        for one, phases, size in zip(measured, samples, sizes)
    ]


# --- the optimizer ---------------------------------------------------------------------------------------


def optimizer_rate(layers: list, where: torch.device, repeat: Repeat) -> float:
    """Seconds per parameter of one Adam step over copies of the layers' weights (up to
    _OPTIMIZER_STATE_CAP_BYTES of state), each step after a cache flush (as profile_cpu_optimizer: in a run,
    a whole iteration's passes come between two steps and leave the state out of the caches). The copies keep the user's weights and optimizer untouched. 0 without weights."""
    generator = torch.Generator(device=where).manual_seed(1)
    copies, state = [], 0
    for p in (p for layer in layers for p in _trainable(layer) if p.is_floating_point()):
        size = 4 * p.numel() * p.element_size()  # value, gradient and the two moments
        if copies and state + size > _OPTIMIZER_STATE_CAP_BYTES:
            break
        c = p.detach().clone().requires_grad_()
        c.grad = _normal(c, generator)
        copies.append(c)
        state += size
    if not copies:
        return 0.0
    adam = torch.optim.Adam(copies, lr=1e-6)
    adam.step()  # the first step makes the moments; a run's steps find them made
    flush = CacheFlush(where)
    clock = _Clock(where)

    def step():
        flush()
        clock.start()
        t0 = clock.mark()
        adam.step()
        t1 = clock.mark()
        return clock.seconds([(t0, t1)])

    samples = repeat.alone(step, 1)[0]
    return timing(samples)["median_s"] / sum(c.numel() for c in copies)
