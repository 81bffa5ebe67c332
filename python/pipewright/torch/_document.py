"""The profile as pipewright reads it (docs/profile-format.md, profiler/profile.cpp), the explicit-cost model
of the measured layers, and writing them."""

from __future__ import annotations

import os
from typing import Optional

import torch

from pipewright._cli import PipewrightError
from pipewright.torch._measure import timing


# --- the files -------------------------------------------------------------------------------------------


def _machine(where: torch.device, group: Optional[tuple]) -> dict:
    if where.type == "cuda":
        props = torch.cuda.get_device_properties(where)
        ranks = group[1] if group else 1
        return {"backend": "cuda", "device": f"{ranks} x {props.name}", "cores": props.multi_processor_count,
                "threads_per_rank": 1, "wakeup_s": 0.0}
    return {"backend": "cpu", "device": _cpu_name(), "cores": os.cpu_count() or 1,
            "threads_per_rank": torch.get_num_threads(), "wakeup_s": 0.0}


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and ":" in line:
                    return line.split(":", 1)[1].strip() or "unknown CPU"
    except OSError:
        pass
    return "unknown CPU"


def _tool(where: torch.device, dtype_text: str, timed_as: str) -> str:
    import pipewright

    return (f"pipewright {pipewright.__version__} torch profiler ({where.type}, {dtype_text}, torch {torch.__version__}, "
            f"{timed_as} timing)")


def _dtype_text(measured: list) -> str:
    dtypes = sorted({str(p.dtype).replace("torch.", "") for m in measured for p in m["layer"].parameters()})
    return "/".join(dtypes) or "no weights"


def profile_document(where, group, name, keys, layer_kinds, micro_batch, measured, network, rate,
                     timed_as: str = "pass", runtime: Optional[dict] = None) -> dict:
    """The profile, its fields in the order the C++ writes them (profiler/profile.cpp)."""
    links, collectives = network
    document = {
        "format": "pipewright-profile",
        "version": 1,
        "tool": _tool(where, _dtype_text(measured), timed_as),
        "machine": _machine(where, group),
    }
    if keys:
        document["model"] = dict(keys["model"], name=name)
    document["layers"] = _layer_entries(keys, layer_kinds, micro_batch, measured)
    document["links"] = links
    if collectives:
        # Each with the group's slowest measured link, the one its ring is bound by.
        slowest = min(links, key=lambda link: link["bandwidth_bytes_per_s"])
        link = {"bandwidth_bytes_per_s": slowest["bandwidth_bytes_per_s"], "latency_s": slowest["latency_s"]}
        document["collectives"] = [dict(c, link=link) for c in collectives]
    document["optimizer_s_per_parameter"] = rate
    if runtime:
        document["runtime"] = runtime
    return document


def _layer_entries(keys, layer_kinds, micro_batch, measured) -> list:
    """One entry per distinct layer: with a pipewright model, per kind and shape, the samples of its layers
    pooled (a profile holds one block, however many the pipeline has); without one, per torch layer."""
    # Every layer of a kind has one shape (a dense and an MoE block are two kinds).
    shapes = {layer["kind"]: layer["shape"] for layer in keys["layers"]} if keys else {}
    groups = {}
    for i, m in enumerate(measured):
        if keys:
            kind = layer_kinds[i]
            shape = shapes[kind]
        else:
            kind, shape = "block", f"torch layer {i}: {type(m['layer']).__name__}"
        groups.setdefault((kind, shape), []).append(m)
    batch, sequence = micro_batch
    entries = []
    last = measured[-1]
    for (kind, shape), members in groups.items():
        pooled = [sum((m["samples"][phase] for m in members), []) for phase in range(4)]
        # The head (or the pipeline's last layer) sends nothing on.
        sends = not (kind == "head" or (not keys and members[-1] is last))
        entries.append({
            "kind": kind,
            "shape": shape,
            "micro_batch_size": batch,
            "seq_len": sequence,
            "forward": timing(pooled[0]),
            "backward_input": timing(pooled[1]),
            "backward_weight": timing(pooled[2]),
            "backward": timing(pooled[3]),
            "activation_bytes": max(m["activation_bytes"] for m in members),
            "weight_grad_bytes": max(m["weight_grad_bytes"] for m in members),
            "output_bytes": max(m["output_bytes"] for m in members) if sends else 0,
        })
    return entries


def explicit_model(name: str, measured: list) -> dict:
    """The layers as a pipewright model with explicit per-layer costs (the model format's "layers"): what
    `plan --model` plans any layers with, the profile adding the measured links and optimizer."""
    layers = []
    for i, m in enumerate(measured):
        layers.append({
            "name": f"{i}: {type(m['layer']).__name__}",
            "forward_s": timing(m["samples"][0])["median_s"],
            "backward_input_s": timing(m["samples"][1])["median_s"],
            "backward_weight_s": timing(m["samples"][2])["median_s"],
            "backward_s": timing(m["samples"][3])["median_s"],
            "output_bytes": m["output_bytes"] if i + 1 < len(measured) else 0,
            "activation_bytes": m["activation_bytes"],
            "parameter_bytes": m["parameter_bytes"],
        })
    return {"name": name, "layers": layers}


def write_text(path: str, text: str) -> None:
    """As the CLI's write_output_file: the folder made where missing, the file replaced whole (written
    beside it, then renamed), so that a reader never sees half of it."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    temporary = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    try:
        with open(temporary, "w") as f:
            f.write(text)
        os.replace(temporary, path)
    except OSError as e:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise PipewrightError(f"cannot write '{path}': {e.strerror}", "runtime", 1) from None
