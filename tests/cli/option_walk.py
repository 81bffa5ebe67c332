#!/usr/bin/env python3
"""Every option of every command, given 0, -1, INT_MAX, 1e308, 1e-310, nan and inf on a small valid
invocation: each run must end within its bound with exit 0 and an answer free of nan, inf and runaway
numbers, or exit 2 with one `error:` line. Run by ctest (cli.option_walk); standard library only.

    python3 tests/cli/option_walk.py --binary build/cli/pipewright [--only plan] [--jobs 2]
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile
import time

VALUES = ["0", "-1", "2147483647", "1e308", "1e-310", "nan", "inf"]
SECONDS = 30  # per run; the target is 2 s for a refusal, generous for a loaded 2-core machine under ctest -j2

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(SOURCE, "examples", "tiny-llama.json")
UNIFORM = os.path.join(SOURCE, "examples", "tiny-uniform.json")
SMALL = ["--model", TINY, "--cluster", "dgx-h100"]

# A small valid invocation of each command: the walk adds one option to it at a time ({fresh}: an output path
# of the run's own). Options that only
# make sense beside others (--max-pending with a zb schedule) still parse alone: their refusal is checked.
BASES = {
    "simulate": ["simulate", *SMALL, "--pp", "2", "--microbatches", "4"],
    # The MoE options take effect on a model with experts.
    "simulate:moe": ["simulate", "--model", os.path.join(SOURCE, "examples", "tiny-moe.json"), "--cluster", "dgx-h100",
                     "--pp", "2", "--ep", "2", "--dp", "2", "--microbatches", "4"],
    "show": ["show", *SMALL, "--pp", "2", "--microbatches", "4"],
    "compare": ["compare", *SMALL, "--pp", "2", "--microbatches", "4", "--schedules", "1f1b,gpipe"],
    "plan": ["plan", *SMALL, "--gpus", "8", "--global-batch-size", "16", "--schedules", "1f1b,interleaved"],
    # The training run's options take effect with --train-tokens; --repair with --spares.
    "plan:train": ["plan", *SMALL, "--gpus", "16", "--global-batch-size", "16", "--schedules", "1f1b", "--train-tokens",
                   "1T", "--spares", "1"],
    "replan": ["replan", "--plan", "{plan}", "--failed-nodes", "1"],
    "serve simulate": ["serve", "simulate", *SMALL, "--requests", "16", "--prompt-tokens", "16", "--output-tokens", "8"],
    "serve plan": ["serve", "plan", *SMALL, "--gpus", "2", "--requests", "16", "--prompt-tokens", "16",
                   "--output-tokens", "8"],
    "serve run": ["serve", "run", "--model", TINY, "--requests", "4", "--prompt-tokens", "8", "--output-tokens", "4",
                  "--repeat", "1", "--profile", "{profile}"],
    "run": ["run", "--model", UNIFORM, "--cluster", "ideal", "--pp", "2", "--microbatches", "2", "--compute", "sleep",
            "--no-profile", "--iterations", "1", "--warmup", "0"],
    "profile": ["profile", "--model", TINY, "--min-time", "0.001", "--link-repetitions", "1"],
    "calibrate": ["calibrate", "--profile", "{profile}", "--out", "{fresh}"],
    "kernels query": ["kernels", "query", "{kernels}", "--gemm", "64", "64", "64"],
    "kernels coverage": ["kernels", "coverage", "{kernels}", *SMALL, "--pp", "2", "--microbatches", "4"],
    "kernels import aiconfigurator": ["kernels", "import", "aiconfigurator", "--system", "a100_sxm", "--backend",
                                      "trtllm", "--kinds", "gemm_perf", "--out", "{fresh}"],
    "models": ["models"],
    "clusters": ["clusters"],
}

OPTION = re.compile(r"^\s+(?:-\w,)?(--[a-z0-9-]+)(?:,--[a-z0-9-]+)?(?:\{[^}]*\})?\s+([A-Z]+)")
BAD_WORD = re.compile(r"(?<![\w.-])-?(nan|inf|infinity)(?![\w-])", re.IGNORECASE)
RUNAWAY = re.compile(r"\d{16,}")  # a figure no range allows: the 300-digit days of an unbounded option


def options(binary, command):
    """The options of a command that take a value, with their kind (INT, FLOAT, TEXT...), from its --help."""
    help_text = subprocess.run([binary, *command.split(), "--help"], capture_output=True, text=True,
                               timeout=SECONDS).stdout
    found = []
    for line in help_text.splitlines():
        m = OPTION.match(line)
        if m and m.group(1) not in ("--help",):
            found.append((m.group(1), m.group(2)))
    return found


def check(binary, args, cwd, names_a_file):
    """The exit code and None when the run behaved, else what went wrong."""
    start = time.monotonic()
    try:
        r = subprocess.run([binary, *args], capture_output=True, text=True, timeout=SECONDS, cwd=cwd,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, f"still running after {SECONDS} s"
    seconds = time.monotonic() - start
    if r.returncode == 2:
        if not (r.stderr.startswith("error: ") and r.stderr.count("\n") == 1):
            return 2, f"exit 2 without one error line: {r.stderr[:300]!r}"
        return 2, None
    if r.returncode != 0:
        return r.returncode, f"exit {r.returncode} after {seconds:.1f} s: {r.stderr.strip()[:300]!r}"
    # A name (a file called nan) is echoed as given; a number must never print as nan or inf.
    for stream in (r.stdout, r.stderr) if not names_a_file else ():
        bad = BAD_WORD.search(stream) or RUNAWAY.search(stream)
        if bad:
            line = next(l for l in stream.splitlines() if bad.group(0) in l)
            return 0, f"exit 0 with {bad.group(0)!r} in: {line.strip()[:200]!r}"
    return 0, None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--only", action="append", help="walk only these commands (repeatable)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--verbose", action="store_true", help="print every run's exit code")
    parser.add_argument("--without-aiconfigurator", action="store_true",
                        help="leave out kernels import (no aiconfigurator package here; PIPEWRIGHT_PYTHON names one)")
    a = parser.parse_args()
    binary = os.path.abspath(a.binary)
    with tempfile.TemporaryDirectory(prefix="option-walk-") as cwd:
        # The inputs some commands read, made once by the commands themselves.
        files = {"plan": os.path.join(cwd, "plan.json"), "profile": os.path.join(cwd, "profile.json"),
                 "kernels": os.path.join(cwd, "kernels")}
        setup = [
            ["plan", *SMALL, "--gpus", "16", "--global-batch-size", "16", "--pp", "2", "--schedules", "1f1b",
             "--out", files["plan"]],
            ["profile", "--model", TINY, "--min-time", "0.001", "--link-repetitions", "1", "--micro-batch-size", "1",
             "2", "--serving", "--out", files["profile"], "--kernels-out", files["kernels"]],
        ]
        for args in setup:
            subprocess.run([binary, *args], check=True, capture_output=True, cwd=cwd, timeout=300)
        commands = a.only or [n for n in BASES if not (a.without_aiconfigurator and n.startswith("kernels import"))]
        runs = []
        for name in commands:
            command = name.split(":")[0]
            base = [x.format(**files, fresh="{fresh}") for x in BASES[name]]
            # The base itself must answer, or every refusal below would be its own.
            r = subprocess.run([binary, *[x.format(fresh=f"base-{len(runs)}") for x in base]], capture_output=True, text=True, cwd=cwd, timeout=300)
            if r.returncode != 0:
                print(f"the base of {name} failed: {r.stderr.strip()}")
                return 1
            for option, kind in options(binary, command):
                for value in VALUES:
                    # A new output path for each run: one that exists is refused, which would hide the option's answer.
                    fresh = f"out-{len(runs)}"
                    runs.append((command, option, kind, value, [x.format(fresh=fresh) for x in base] + [option, value]))
        failures = []
        answered = refused = 0
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
            results = pool.map(lambda run: (run, check(binary, run[4], cwd, run[2] == "TEXT")), runs)
            for (command, option, kind, value, args), (code, problem) in results:
                if a.verbose:
                    print(f"{code} {command} {option} {value}")
                if problem:
                    failures.append(f"pipewright {command} ... {option} {value}: {problem}")
                else:
                    answered += code == 0
                    refused += code == 2
        print(f"{len(runs)} runs of {len(commands)} commands: {answered} answered, {refused} refused in one "
              f"line, {len(failures)} failed")
        for f in failures:
            print(f)
        return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
