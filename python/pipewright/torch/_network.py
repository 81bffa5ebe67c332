"""Under torch.distributed: the send/receive link between each rank and the next, the collectives over all
ranks, and the profile shared from rank 0. Times are seconds, sizes bytes."""

from __future__ import annotations

import time
from typing import Optional

import torch

from pipewright.torch._measure import timing


# --- links and collectives between ranks -----------------------------------------------------------------


def process_group() -> Optional[tuple]:
    """(rank, world size) under an initialized torch.distributed of 2 ranks or more, else None."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized() or dist.get_world_size() < 2:
        return None
    return dist.get_rank(), dist.get_world_size()


def _network_device() -> torch.device:
    import torch.distributed as dist

    # NCCL moves GPU memory; gloo and the others move host memory.
    if "nccl" in str(dist.get_backend()):
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _fit_link(samples: list) -> tuple:
    """profiler/link_line.cpp's fit of time = latency + bytes / bandwidth: least squares on relative error
    with latency >= 0; plain least squares where that slope is not positive; where the time does not grow
    with the size at all, the mean time as latency and the largest message's bytes over its time."""

    def line(weight):
        sw = sx = sy = sxx = sxy = 0.0
        for s in samples:
            w = weight(s["time_s"])
            b, t = s["bytes"], s["time_s"]
            sw, sx, sy, sxx, sxy = sw + w, sx + w * b, sy + w * t, sxx + w * b * b, sxy + w * b * t
        det = sw * sxx - sx * sx
        slope = (sw * sxy - sx * sy) / det if det != 0 else 0.0
        latency = (sy - slope * sx) / sw if sw != 0 else 0.0
        if latency < 0:
            latency, slope = 0.0, (sxy / sxx if sxx > 0 else 0.0)
        return latency, slope

    latency, slope = line(lambda t: 1.0 / max(t * t, 1e-30))
    if not slope > 0:
        latency, slope = line(lambda t: 1.0)
    if not slope > 0:
        largest = max(samples, key=lambda s: s["bytes"])
        latency = sum(s["time_s"] for s in samples) / len(samples)
        slope = largest["time_s"] / largest["bytes"]
    return latency, 1.0 / slope


def _measure_link(src: int, dst: int, rank: int, sizes: list, repeats: int, where: torch.device) -> Optional[dict]:
    """One-way times from src to dst: round trips (the first warms the path up and is left out), halved,
    their median per size; timed on src, which returns the link (the others None)."""
    import torch.distributed as dist

    peer = dst if rank == src else src
    samples = []
    for nbytes in sizes:
        buffer = torch.zeros(nbytes, dtype=torch.uint8, device=where)
        one_way = []
        for i in range(repeats + 1):
            if rank == src:
                t0 = time.perf_counter()
                dist.send(buffer, peer)
                dist.recv(buffer, peer)
                if where.type == "cuda":
                    torch.cuda.synchronize(where)  # NCCL's receive returns before the bytes land
                if i > 0:
                    one_way.append((time.perf_counter() - t0) / 2)
            else:
                dist.recv(buffer, peer)
                dist.send(buffer, peer)
        if rank == src:
            samples.append({"bytes": nbytes, "time_s": timing(one_way)["median_s"]})
    if rank != src:
        return None
    latency, bandwidth = _fit_link(samples)
    return {"src": src, "dst": dst, "latency_s": latency, "bandwidth_bytes_per_s": bandwidth, "samples": samples}


def _time_collective(kind: str, nbytes: int, world: int, repeats: int, where: torch.device) -> tuple:
    """One collective over every rank, nccl-tests' way: one run to warm up, then the mean of back-to-back
    runs. `bytes` is the whole array's size (a multiple of the ranks' float32 shares)."""
    import torch.distributed as dist

    share = max(1, nbytes // (4 * world))
    whole = torch.zeros(share * world, dtype=torch.float32, device=where)
    part = torch.zeros(share, dtype=torch.float32, device=where)
    run = {
        "all_reduce": lambda: dist.all_reduce(whole),
        "all_gather": lambda: dist.all_gather_into_tensor(whole, part),
        "reduce_scatter": lambda: dist.reduce_scatter_tensor(part, whole),
    }[kind]
    run()
    if where.type == "cuda":
        torch.cuda.synchronize(where)
    t0 = time.perf_counter()
    for _ in range(repeats):
        run()
    if where.type == "cuda":
        torch.cuda.synchronize(where)
    return whole.numel() * 4, (time.perf_counter() - t0) / repeats


def measure_network(group: tuple, sizes: list, repeats: int) -> tuple:
    """Every rank's link to the next (the pipeline's neighbours), one pair at a time, then the collectives
    over all ranks; rank 0 gets them all (a collective's time is its slowest rank's)."""
    import torch.distributed as dist

    rank, world = group
    where = _network_device()
    mine = []
    for src in range(world - 1):
        dist.barrier()  # one pair at a time: the others' traffic is no part of this link
        if rank in (src, src + 1):
            link = _measure_link(src, src + 1, rank, sizes, repeats, where)
            if link:
                mine.append(link)
    dist.barrier()
    times = []
    for kind in ("all_reduce", "all_gather", "reduce_scatter"):
        for nbytes in sizes:
            times.append((kind, *_time_collective(kind, nbytes, world, repeats, where)))
    gathered = [None] * world
    dist.all_gather_object(gathered, (mine, times))
    link_list = [link for links, _ in gathered for link in links]
    collectives = [
        {"kind": kind, "ranks": world, "bytes": nbytes, "time_s": max(g[1][i][2] for g in gathered)}
        for i, (kind, nbytes, _) in enumerate(times)
    ]
    return link_list, collectives


def broadcast(document: Optional[dict]) -> dict:
    import torch.distributed as dist

    box = [document]
    dist.broadcast_object_list(box, src=0, device=_network_device())
    # Every rank has it before any returns: a caller that tears the group down at once would otherwise catch a
    # peer still receiving, and gloo aborts it ("terminate called without an active exception").
    dist.barrier()
    return box[0]
