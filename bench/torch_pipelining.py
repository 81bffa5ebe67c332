"""Benchmark: pipewright's predicted step against PyTorch's pipelining runtime running pipewright's schedule.

A decoder-only transformer built in PyTorch is profiled with pipewright.torch.profile on two gloo processes
(its layers on one thread each, and the gloo link between the ranks), every schedule is simulated by
pipewright at each pp with that profile and exported as a PyTorch pipelining CSV, and each CSV is run by
torch.distributed.pipelining's _PipelineScheduleRuntime on gloo processes on this machine's CPU (one thread
a rank, an Adam step inside the timed step as pipewright's synchronous optimizer counts one). Prints
schedule | pp | m | predicted step | measured step | error, and checks that each rank executed pipewright's
computations in pipewright's order.

    PYTHONPATH=build/python:python .venv/bin/python3 bench/torch_pipelining.py [--pp 2,4] [--steps 7] [--rounds 3]

With --rounds N the whole bench (a profile, then every row) runs N times in turn; each row's error is the
median of its N errors, each against the profile of its own round, so that the VM's speed drifting between a
profile and a run (13% over minutes, seen here) weighs on no row more than on another.

Each timed step is the slowest rank's time from a barrier to the end of its step and optimizer update; the
measured step is their median; error is measured / predicted - 1. Ranks beyond the machine's cores share
them: the prediction assumes a core (a GPU) per rank, so pp above `nproc` is not expected to meet it; the
table says so.

`core elsewhere` is the largest share of a rank's compute time during which its thread did not run (thread
CPU time against wall time): another process on the cores, or the other ranks where pp exceeds them. Rows
with pp <= cores are run again (--retries) when it passes 5%, and the least disturbed run is kept.

`error without the runtime's time` is the same run against the prediction from the same profile less its
`runtime` (torch.distributed.pipelining's time per compute call and per posted transfer,
docs/profile-format.md). One more column
tells the cost model's error from the simulator's: the busiest rank's compute, predicted
(from the profile) and measured (its F, I, B and W actions as the runtime ran them, summed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch

import pipewright
from pipewright.torch import small_gpt
from pipewright.torch.pipelining import (
    compare_orders,
    cpu_cluster,
    format_table,
    profile_on_gloo,
    read_schedule_csv,
    run_csv_schedule,
    stage_layers_from_simulation,
)

VOCAB, HIDDEN, HEADS, FFN, SEQ, BLOCKS = 512, 256, 8, 1024, 64, 8
MICRO_BATCH_SIZE = 2
# (schedule, model chunks a rank): every schedule pipewright exports.
SCHEDULES = [
    ("gpipe", 1), ("1f1b", 1), ("zb-h1", 1), ("zb-h2", 1), ("zb-auto", 1),
    ("interleaved", 2), ("bfs", 2), ("interleaved-overlap", 2),
    ("zb-v", 1), ("v-half", 1), ("v-min", 1), ("dualpipev", 1),
]


SHAPE = small_gpt.GptShape(vocab=VOCAB, hidden=HIDDEN, heads=HEADS, ffn=FFN, seq=SEQ, blocks=BLOCKS)
loss_fn = small_gpt.loss


def build_layers():
    return small_gpt.layers(SHAPE)


class Batch:
    """make_batch for m micro-batches (picklable)."""

    def __init__(self, microbatches: int):
        self.microbatches = microbatches

    def __call__(self):
        return small_gpt.token_batch(SHAPE, self.microbatches * MICRO_BATCH_SIZE)


def make_example():
    return Batch(1)()[0]


def run_round(args, folder: str) -> list:
    """One profile (in `folder`), then every (pp, schedule) row predicted from it and run: each row's record."""
    profile, model = os.path.join(folder, "profile.json"), os.path.join(folder, "model.json")
    t = time.perf_counter()
    document = profile_on_gloo(build_layers, make_example, out=profile, model_out=model, name="torch-transformer",
                               link_sizes=[1024, 16384, 65536, 262144, 1048576])
    link = document["links"][0] if document["links"] else None
    print(f"\nmodel: {BLOCKS} blocks, hidden {HIDDEN}, {HEADS} heads, ffn {FFN}, vocab {VOCAB}, seq {SEQ}, "
          f"micro-batch {MICRO_BATCH_SIZE}; profiled in {time.perf_counter() - t:.1f} s"
          + (f" (gloo link {link['latency_s'] * 1e6:.0f} us + bytes / {link['bandwidth_bytes_per_s'] / 1e9:.2f} GB/s)"
             if link else ""), flush=True)
    # The same profile without the runtime's time per call: what the prediction was before it was measured,
    # against the same runs.
    bare = os.path.join(folder, "profile-without-runtime.json")
    with open(bare, "w") as f:
        json.dump({k: v for k, v in document.items() if k != "runtime"}, f, indent=2)
    if "runtime" in document:
        runtime = document["runtime"]
        print(f"runtime: {runtime['name']}, {runtime['action_s'] * 1e6:.0f} us a compute call, "
              f"{runtime.get('transfer_s', 0) * 1e6:.0f} us a send or receive posted", flush=True)
    cluster = cpu_cluster()
    chunks = dict(SCHEDULES)
    records = []
    for pp in [int(p) for p in args.pp.split(",")]:
        for schedule in args.schedules.split(","):
            vpp = chunks.get(schedule, 1)
            csv_path = os.path.join(folder, f"{schedule}-pp{pp}.csv")
            try:
                predicted = pipewright.simulate(model=model, profile=profile, cluster=cluster, pp=pp, vpp=vpp,
                                                microbatches=args.microbatches, schedule=schedule,
                                                export_csv=csv_path)
            except pipewright.PipewrightError as e:
                print(f"{schedule} pp {pp}: pipewright: {e}", file=sys.stderr)
                continue
            without = pipewright.simulate(model=model, profile=bare, cluster=cluster, pp=pp, vpp=vpp,
                                          microbatches=args.microbatches, schedule=schedule)["step_time_s"]
            expected = read_schedule_csv(csv_path)
            stage_layers = stage_layers_from_simulation(predicted)
            cores = os.cpu_count() or 1
            result, best_held = None, float("inf")
            for attempt in range(1 + (args.retries if pp <= cores else 0)):
                run = run_csv_schedule(build_layers, csv_path, stage_layers, microbatches=args.microbatches,
                                       make_batch=Batch(args.microbatches), loss_fn=loss_fn, warmup=args.warmup,
                                       steps=args.steps, optimizer=True)
                held = max(run.held_elsewhere(r) for r in range(run.ranks))
                if held < best_held:
                    result, best_held = run, held
                if held <= 0.05:
                    break
                print(f"{schedule} pp {pp}: the ranks' cores went elsewhere for {held:.0%} of their compute; "
                      f"{'again' if attempt < args.retries and pp <= cores else 'kept'}", flush=True)
            diffs = [compare_orders(expected, {r: s[i] for r, s in result.executed_steps.items()})
                     for i in range(args.warmup + args.steps)]
            diff = next((d for d in diffs if d), None)
            pred_s = predicted["step_time_s"]
            records.append({"schedule": schedule, "pp": pp, "vpp": vpp, "microbatches": args.microbatches,
                            "predicted_step_s": pred_s, "measured_step_s": result.step_s,
                            "measured_steps_s": result.step_times_s, "error": result.step_s / pred_s - 1,
                            "error_without_runtime": result.step_s / without - 1,
                            "predicted_busy_s": max(s["busy_s"] for s in predicted["stages"]),
                            "measured_busy_s": max(result.busy_s(r) for r in range(result.ranks)),
                            "core_held_elsewhere": best_held, "order": diff or "same",
                            "note": "" if pp <= cores else f"{pp} ranks on {cores} cores"})
            print(f"{schedule} pp {pp}: predicted {pred_s * 1e3:.1f} ms, measured {result.step_s * 1e3:.1f} ms "
                  f"({', '.join(f'{x * 1e3:.1f}' for x in result.step_times_s)}), order "
                  f"{'same' if diff is None else diff}", flush=True)
    return records


def aggregate(runs: list) -> dict:
    """One row over its rounds: the medians of its predicted and measured steps and busy times, the median of
    its rounds' errors (each measured against its own round's profile), every order difference."""
    median = statistics.median
    first = runs[0]
    return {**{k: first[k] for k in ("schedule", "pp", "vpp", "microbatches", "note")},
            "predicted_step_s": median(r["predicted_step_s"] for r in runs),
            "measured_step_s": median(r["measured_step_s"] for r in runs),
            "error": median(r["error"] for r in runs), "round_errors": [r["error"] for r in runs],
            "error_without_runtime": median(r["error_without_runtime"] for r in runs),
            "predicted_busy_s": median(r["predicted_busy_s"] for r in runs),
            "measured_busy_s": median(r["measured_busy_s"] for r in runs),
            "core_held_elsewhere": max(r["core_held_elsewhere"] for r in runs),
            "order": next((r["order"] for r in runs if r["order"] != "same"), "same")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pp", default="2,4", help="pipeline degrees, comma-separated")
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--schedules", default=",".join(s for s, _ in SCHEDULES))
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--retries", type=int, default=2,
                    help="runs again a row (pp <= cores) whose ranks' cores went elsewhere for more than 5%% of their "
                         "compute (another process running), keeping the least disturbed run")
    ap.add_argument("--folder", help="where the profile, model and CSVs go (default: a temporary folder)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="profile and run every row this many times in turn; each row's error is the median of its "
                         "rounds' errors, each against its own round's profile (the machine's speed drifts)")
    ap.add_argument("--json", help="also write the rows as JSON here")
    args = ap.parse_args(argv)

    folder = args.folder or tempfile.mkdtemp(prefix="pipewright-torch-pipelining-")
    os.makedirs(folder, exist_ok=True)
    print(f"machine: {os.cpu_count()} cores, torch {torch.__version__}, one thread a rank; load average "
          f"{os.getloadavg()[0]:.2f} at the start")
    rounds = []
    for number in range(args.rounds):
        round_folder = os.path.join(folder, f"round-{number}") if args.rounds > 1 else folder
        os.makedirs(round_folder, exist_ok=True)
        rounds.append(run_round(args, round_folder))
    records = [aggregate([one[i] for one in rounds]) for i in range(len(rounds[0]))]
    rows = [[r["schedule"], r["pp"], r["microbatches"], f"{r['predicted_step_s'] * 1e3:.1f} ms",
             f"{r['measured_step_s'] * 1e3:.1f} ms", f"{r['error']:+.1%}", f"{r['error_without_runtime']:+.1%}"]
            + ([" ".join(f"{e:+.1%}" for e in r["round_errors"])] if args.rounds > 1 else [])
            + [f"{r['predicted_busy_s'] * 1e3:.1f} / {r['measured_busy_s'] * 1e3:.1f} ms",
               f"{r['core_held_elsewhere']:.0%}", r["order"], r["note"]]
            for r in records]
    print()
    print(format_table(rows, ["schedule", "pp", "m", "predicted step", "measured step", "error",
                              "error without the runtime's time"]
                       + (["each round's error"] if args.rounds > 1 else [])
                       + ["busiest rank's compute pred / meas", "core elsewhere", "order", ""]))
    within = [r for r in records if r["pp"] <= (os.cpu_count() or 1)]
    if within:
        for label, key in (("", "error"), (" without the runtime's time", "error_without_runtime")):
            errors = [abs(r[key]) for r in within]
            print(f"pp <= cores{label}: median |error| {statistics.median(errors):.1%}, max {max(errors):.1%} "
                  f"over {len(within)} runs")
    print(f"load average {os.getloadavg()[0]:.2f} at the end (the runs' own ranks count in it)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=2)
    return 0 if all(r["order"] == "same" for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
