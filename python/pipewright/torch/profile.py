"""pipewright.torch.profile: the user's own PyTorch layers measured into pipewright's profile format
(docs/profile-format.md), the way `pipewright profile` measures its own kernels (profiler/cpu_profiler.cpp):
F, B (the input's gradient) and W (the weights' gradient) timed apart, as zero-bubble schedules split
backward; warm-up runs, then turns over the layers until a count and a time are reached; the median with
p10..p90; the bytes F keeps for B and W and B keeps for W; Adam's rate; and, under torch.distributed, the
links between the ranks and the collectives over them. Times are seconds, sizes bytes."""

from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Any, Optional, Sequence

import torch

from pipewright._cli import PipewrightError, command_json
from pipewright.torch._document import explicit_model, profile_document, write_text
from pipewright.torch._measure import Repeat, measure_layers, optimizer_rate, placed, state, tensors
from pipewright.torch._network import broadcast, measure_network, process_group
from pipewright.torch._runtime import measure_runtime

_KINDS = ("embedding", "block", "moe-block", "head")
_MODEL_FORMS = "a preset, path, dict or transformers config"


def profile(
    layers: Sequence[torch.nn.Module],
    example_input: Any,
    *,
    out: Optional[str | os.PathLike] = None,
    model: Any = None,
    kinds: Optional[Sequence[str]] = None,
    model_out: Optional[str | os.PathLike] = None,
    name: Optional[str] = None,
    device: Optional[str | torch.device] = None,
    dtype: Optional[torch.dtype] = None,
    micro_batch_size: Optional[int] = None,
    seq_len: Optional[int] = None,
    repeats: int = 10,
    max_repeats: Optional[int] = None,
    warmup: int = 3,
    min_time: float = 0.2,
    links: bool = True,
    link_sizes: Optional[Sequence[int]] = None,
    link_repeats: int = 5,
    timing: str = "pass",
    runtime: bool = True,
) -> dict:
    """Measures `layers` (the pipeline's layers in order, or an nn.Sequential) on one micro-batch,
    `example_input` being the first layer's input and each next layer's its predecessor's output, and
    returns pipewright's profile as a dict, also written to `out` (JSON) when given.

    model, kinds: the pipewright model the layers are (a preset name, path, dict or transformers config)
        and each layer's kind in it ("embedding", "block", "moe-block", "head"; by default the first layer
        is the embedding, the last the head and the ones between the model's blocks 0, 1, ...): the entries
        then carry that model's layer shapes, and `pipewright plan --model MODEL --profile OUT` plans with
        the measured times. Without a model, the entries name the torch layers, which no pipewright model
        has: write `model_out` and plan with it.
    model_out: also write the layers as a pipewright model with explicit per-layer costs (their times,
        bytes and exact parameter bytes), which `plan --model MODEL_OUT --profile OUT` plans with.
    name: the model's name in what is written (default: the model's, or "torch-layers").
    device, dtype: profile copies of the layers moved to this device or cast to this floating dtype (the
        user's layers are never changed); default: where and as they are.
    micro_batch_size, seq_len: what the entries are for (default: the input's first dimension, and its
        second for a model's token ids or a (batch, sequence, hidden) input, else 1).
    repeats, max_repeats, warmup, min_time: `warmup` untimed runs first, then timed runs until at least
        `repeats` runs and `min_time` seconds a layer (at most `max_repeats` runs, default 1000): passes
        over the layers (timing "pass"), or runs of each layer in 5 turns over the layers ("repeated").
    links, link_sizes, link_repeats: under torch.distributed with 2 ranks or more, the send/receive link
        between each rank and the next (the median of `link_repeats` round trips, halved, at each size in
        bytes; default 1 KiB, 4 KiB, ..., 64 MiB) and the all-reduce, all-gather and reduce-scatter over all
        ranks. Every rank calls profile(); rank 0 measures the layers and writes the files, and every rank
        returns the profile.
    timing: "pass" (default): the layers are timed in passes as a pipeline runs them, F of each in order
        and then B and W of each in reverse order, then B and W as one pass (`backward`, what a full backward
        costs), so that other layers' work comes between two runs of a layer as inside a stage, and a layer's
        weights stay in the caches only where the layers together fit there (a pass holds one micro-batch's
        activations of the layers, in groups of consecutive layers that keep at most half the GPU's free
        memory or a quarter of the host's). "repeated": each layer runs again and again on its own, its
        weights cached (faster than inside a stage wherever the stage's layers exceed the caches).
    runtime: under torch.distributed on the CPU, also measure what torch.distributed.pipelining's runtime spends
        beyond the layers' work (the profile's "runtime", docs/profile-format.md): on each compute call (one
        stage of a Linear(8, 8) run from a compute-only CSV), which pipewright charges every action of a
        schedule, a full backward once; and on posting each send or receive from the rank's thread (two such
        stages on ranks 0 and 1), for which the simulator holds the rank. On a GPU the host's time runs ahead
        of the device and nothing is measured.
    Bad arguments raise PipewrightError(message, "input", 2).
    """
    layers = _layer_list(layers)
    repeat = _repeat(repeats, max_repeats, warmup, min_time, link_repeats)
    sizes = _link_sizes(link_sizes)
    outputs = _check_outputs(out, model_out, model)
    where = _device(layers, example_input, device)
    _check_dtype(dtype)
    keys = _profile_keys(model) if model is not None else None
    layer_kinds = _layer_kinds(kinds, len(layers), keys)
    batch, sequence = _micro_batch(example_input, micro_batch_size, seq_len, keys is not None)
    name = _name(name, keys)
    if timing not in ("pass", "repeated"):
        raise _bad(f"timing: must be 'pass' or 'repeated', got {timing!r}")
    if not isinstance(runtime, bool):
        raise _bad(f"runtime: must be True or False, got {runtime!r}")
    group = process_group()
    rank = group[0] if group else 0

    measured = rate = document = None
    if rank == 0:  # the other ranks wait for the links, rather than share its cores or bus with it
        layers, example_input = placed(layers, example_input, where, dtype)
        measured = measure_layers(layers, example_input, where, repeat, timing)
        rate = optimizer_rate(layers, where, repeat)
    network = measure_network(group, sizes, link_repeats) if group and links else ([], [])
    measured_runtime = None
    if group and runtime:
        with tempfile.TemporaryDirectory() as folder:
            measured_runtime = measure_runtime(group, where, repeat, os.path.join(folder, "runtime.csv"))
    if rank == 0:
        document = profile_document(where, group, name, keys, layer_kinds, (batch, sequence), measured, network, rate,
                                    timing, measured_runtime)
        for label, path in outputs:
            made = document if label == "out" else explicit_model(name, measured)
            write_text(path, json.dumps(made, indent=2) + "\n")
    return broadcast(document) if group else document

# --- arguments -------------------------------------------------------------------------------------------


def _bad(message: str) -> PipewrightError:
    return PipewrightError(message, "input", 2)


_LAYERS_FIX = "pass the pipeline's layers in order (a list of modules or an nn.Sequential)"


def _layer_list(layers: Any) -> list:
    if isinstance(layers, torch.nn.Module) and not isinstance(layers, (torch.nn.Sequential, torch.nn.ModuleList)):
        raise _bad(f"layers: got one module; {_LAYERS_FIX}")
    try:
        items = list(layers)
    except TypeError:
        raise _bad(f"layers: got {type(layers).__name__}; {_LAYERS_FIX}") from None
    if not items:
        raise _bad(f"layers: is empty; {_LAYERS_FIX}")
    for i, layer in enumerate(items):
        if not isinstance(layer, torch.nn.Module):
            raise _bad(f"layers[{i}]: is a {type(layer).__name__}, not a torch.nn.Module; pass modules only")
    return items


def _repeat(repeats: Any, max_repeats: Any, warmup: Any, min_time: Any, link_repeats: Any) -> "Repeat":
    def whole(value):
        return isinstance(value, int) and not isinstance(value, bool)

    for label, value, least in (("repeats", repeats, 1), ("warmup", warmup, 0), ("link_repeats", link_repeats, 1)):
        if not whole(value) or value < least:
            raise _bad(f"{label}: must be a whole number of {least} or more, got {value!r}")
    if max_repeats is None:
        max_repeats = max(1000, repeats)
    if not whole(max_repeats) or max_repeats < repeats:
        raise _bad(f"max_repeats: must be a whole number of at least repeats ({repeats}), got {max_repeats!r}")
    if isinstance(min_time, bool) or not isinstance(min_time, (int, float)) or not 0 <= min_time < math.inf:
        raise _bad(f"min_time: must be 0 or more seconds, got {min_time!r}")
    return Repeat(repeats, max_repeats, warmup, float(min_time))


def _link_sizes(sizes: Optional[Sequence[int]]) -> list:
    if sizes is None:
        return [1024 * 4**k for k in range(9)]  # 1 KiB to 64 MiB, as `pipewright profile`
    sizes = list(sizes)
    if len(set(sizes)) < 2 or any(not isinstance(s, int) or isinstance(s, bool) or s < 1 for s in sizes):
        raise _bad(f"link_sizes: give 2 different message sizes or more, in whole bytes, got {sizes!r}")
    return sorted(set(sizes))


def _check_outputs(out: Any, model_out: Any, model: Any) -> list:
    """The outputs as (argument, path), checked before any work as the CLI's check_outputs does
    (cli/output_path.cpp): not a folder, a folder that can be made, not an input, not each other."""
    paths = []
    for label, path in (("out", out), ("model_out", model_out)):
        if path is None:
            continue
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise _bad(f"{label}: must be a file path, got {path!r}")
        path = os.fspath(path)
        if os.path.isdir(path):
            raise _bad(f"{label}: '{path}' is a folder; give a file name")
        folder = os.path.dirname(path)
        existing = folder
        while existing and not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if existing and not os.path.isdir(existing):
            file = os.path.basename(path)
            raise _bad(
                f"{label}: the folder '{folder}' cannot be made: '{existing}' is a file; write '{file}' elsewhere"
            )
        if isinstance(model, (str, os.PathLike)) and os.path.exists(path) and os.path.exists(model):
            if os.path.samefile(path, model):
                raise _bad(f"{label}: '{path}' is an input of this call (model); write the output to another file")
        for other_label, other in paths:
            if os.path.abspath(path) == os.path.abspath(other):
                raise _bad(f"{label}: '{path}' is also the {other_label} output; give each output its own file")
        paths.append((label, path))
    return paths


def _device(layers: list, example_input: Any, device: Any) -> torch.device:
    if device is not None:
        try:
            where = torch.device(device)
        except (RuntimeError, TypeError):
            raise _bad(f"device: '{device}' is no torch device; give 'cpu' or 'cuda' (or 'cuda:N')") from None
    else:
        found = {t.device for layer in layers for t in state(layer)} or {t.device for t in tensors(example_input)}
        if len(found) > 1:
            places = ", ".join(sorted(str(d) for d in found))
            raise _bad(f"device: the layers and the input are on {places}; pass device= to profile them on one")
        where = found.pop() if found else torch.device("cpu")
    if where.type not in ("cpu", "cuda"):
        raise _bad(f"device: '{where}' is not supported; give 'cpu' or 'cuda'")
    if where.type == "cuda":
        if not torch.cuda.is_available():
            raise _bad(f"device: '{where}' but torch sees no CUDA device; give device='cpu'")
        if where.index is None:
            where = torch.device("cuda", torch.cuda.current_device())
    return where


def _check_dtype(dtype: Any) -> None:
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise _bad(f"dtype: must be a floating torch dtype such as torch.bfloat16, got {dtype!r}")


def _micro_batch(example_input: Any, micro_batch_size: Any, seq_len: Any, tokens: bool) -> tuple:
    inputs = tensors(example_input)
    if not inputs:
        raise _bad("example_input: holds no tensor; pass the first layer's input for one micro-batch")
    shape = inputs[0].shape
    for label, value in (("micro_batch_size", micro_batch_size), ("seq_len", seq_len)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise _bad(f"{label}: must be a whole number of 1 or more, got {value!r}")
    batch = micro_batch_size or (shape[0] if len(shape) >= 1 else 1)
    # (batch, sequence) token ids of a model, or (batch, sequence, hidden) activations: the second dimension.
    sequence = seq_len or (shape[1] if len(shape) >= 3 or (tokens and len(shape) == 2) else 1)
    return int(batch), int(sequence)


def _name(name: Any, keys: Optional[dict]) -> str:
    if name is not None and (not isinstance(name, str) or not name):
        raise _bad(f"name: must be a non-empty string, got {name!r}")
    return name or (keys["model"]["name"] if keys else "torch-layers")


# --- what the entries are keyed by --------------------------------------------------------------------


def _profile_keys(model: Any) -> dict:
    """What a profile of `model` is keyed by: the profile's "model" object and each layer's kind and shape,
    from pipewright's own code (`pipewright models --show MODEL --profile-keys`), so that `plan --profile`
    finds the entries written here."""
    try:
        return command_json(["models"], {"show": model, "profile_keys": True}, json_flag="")
    except PipewrightError as e:
        raise _bad(f"model: {e.message}") from None


def _layer_kinds(kinds: Any, count: int, keys: Optional[dict]) -> Optional[list]:
    """Each measured layer's kind: given, or the model's own order (the embedding first, the head last,
    the model's blocks 0, 1, ... between them)."""
    if keys is None:
        if kinds is not None:
            raise _bad(f"kinds: name layers of a pipewright model; pass model= too ({_MODEL_FORMS})")
        return None
    name = keys["model"]["name"]
    known = [layer["kind"] for layer in keys["layers"]]
    if kinds is None:
        if count < 2:
            raise _bad('kinds: one layer cannot be both the embedding and the head; pass kinds=["block"] (or its kind)')
        blocks = [k for k in known if k in ("block", "moe-block")]
        if count - 2 > len(blocks):
            raise _bad(f"kinds: {count - 2} layers between the embedding and the head, but '{name}' has "
                       f"{len(blocks)} blocks; pass kinds= with one kind per layer")
        return ["embedding", *blocks[:count - 2], "head"]
    kinds = list(kinds) if not isinstance(kinds, str) else [kinds]
    if len(kinds) != count:
        raise _bad(f"kinds: names {len(kinds)} kinds for {count} layers; give one kind per layer")
    for i, kind in enumerate(kinds):
        if kind not in _KINDS:
            raise _bad(f"kinds[{i}]: is {kind!r}; give \"embedding\", \"block\", \"moe-block\" or \"head\"")
        if kind not in known:
            other = "block" if kind == "moe-block" else "moe-block"
            raise _bad(f"kinds[{i}]: is \"{kind}\" but '{name}' has none; give \"{other}\"")
    return kinds
