"""Converts NVIDIA AIConfigurator's measured kernel tables into pipewright's kernel-table format.

AIConfigurator (Apache-2.0; PyPI `aiconfigurator-core`, repository ai-dynamo/aiconfigurator) ships, per GPU
system, op family, framework and version, parquet files of measured times:
    <data>/<system>/<family>/<framework>/<version>/<kind>.parquet       e.g. h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet
    <data>/<system>/comm/nccl/<nccl version>/nccl_perf.parquet
Every kind is read the same way: its time columns become seconds (`latency` and `avg_ms` in ms, `*_us` in
microseconds, `*_ms` in ms), every other column is a key, and derived columns (bandwidths, power) are dropped.
The format is docs/kernel-tables.md's; pipewright's C++ side reads it (kernels/kernel_table.cpp).

    python3 -m pipewright.kernels.aiconfigurator --system h200_sxm --backend vllm [--version 0.24.0]
        [--nccl-version 2.29.2] [--data DIR] --out FILE
    python3 -m pipewright.kernels.aiconfigurator --list [--data DIR]

Bad input is one line `error: ...` on stderr and exit 2.
"""

import argparse
import json
import math
import os
import re
import sys

FORMAT = "pipewright-kernel-table"
FORMAT_VERSION = 1
# Columns that say where a row was measured, the same on every row of a file: kept once, in the table.
PROVENANCE = ("framework", "version", "device")
# Columns derived from the times or about the measurement, not a shape: not kept.
DROPPED = re.compile(r"(_bandwidth_gbps|^power|^power_limit)$")


class ImportError_(Exception):
    """A refusal: the message is the whole line after 'error: '; exit 2 (bad input) unless told 1 (this
    machine lacks something)."""

    def __init__(self, message, exit_code=2):
        super().__init__(message)
        self.exit_code = exit_code


def time_scale(column):
    """Seconds per unit of a time column, or None when the column is not a time."""
    if column in ("latency", "avg_ms") or column.endswith("_ms"):
        return 1e-3
    if column.endswith("_us"):
        return 1e-6
    return None


def time_name(column):
    if column in ("latency", "avg_ms"):
        return "time_s"
    return re.sub(r"_(us|ms)$", "", column) + "_s"


def version_key(text):
    """Natural order: 1.3.0rc10 after 1.3.0rc9, 0.5.6.post2 after 0.5.6."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.findall(r"\d+|[A-Za-z]+", text)]


def default_data_dir():
    import importlib.util

    for package in ("aiconfigurator_core", "aiconfigurator"):
        spec = importlib.util.find_spec(package)
        if spec and spec.submodule_search_locations:
            for root in spec.submodule_search_locations:
                data = os.path.join(root, "systems", "data")
                if os.path.isdir(data):
                    return data, package
    raise ImportError_(
        "--data: no AIConfigurator data here; install it (pip install aiconfigurator-core) or give --data "
        "<its systems/data folder>"
    )


def package_version(package):
    try:
        from importlib.metadata import version

        return version(package.replace("_", "-"))
    except Exception:
        return "unknown"


def read_table(path):
    """One parquet file as (column names, rows of Python values)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError_(
            "pyarrow is not installed here; it reads AIConfigurator's parquet files (scripts/install-deps.sh "
            "installs it into .venv, or pip install pyarrow)",
            exit_code=1,
        )
    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow names the problem; the file is what the user needs
        raise ImportError_(f"{path}: not a readable parquet file ({str(e).splitlines()[0]})")
    return table.column_names, table.to_pylist()


def convert(path, kind):
    """A parquet file as one table of pipewright's format."""
    names, rows = read_table(path)
    times = [c for c in names if time_scale(c) is not None and not DROPPED.search(c)]
    if not times:
        raise ImportError_(
            f"{path}: no time column (latency, avg_ms, *_ms or *_us); not an AIConfigurator perf table"
        )
    keys = [c for c in names if c not in times and c not in PROVENANCE and not DROPPED.search(c)]
    if not keys:
        raise ImportError_(f"{path}: no shape columns beside the times; not an AIConfigurator perf table")
    provenance = {}
    out = []
    for number, row in enumerate(rows, start=1):
        for c in PROVENANCE:
            if c in row and row[c] is not None:
                provenance.setdefault(c, str(row[c]))
        values = []
        for c in keys:
            v = row[c]
            if v is None:
                raise ImportError_(f"{path} row {number}: '{c}' is empty")
            if isinstance(v, float) and not math.isfinite(v):
                raise ImportError_(f"{path} row {number}: '{c}' is {v}")
            values.append(v)
        for c in times:
            v = row[c]
            if v is None or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ImportError_(f"{path} row {number}: '{c}' is {v!r}, not a time")
            values.append(v * time_scale(c))
        out.append(values)
    return {
        "kind": kind,
        "keys": keys,
        "times": [time_name(c) for c in times],
        "measured_on": provenance,
        "file": path,
        "rows": out,
    }


def versions(folder):
    if not os.path.isdir(folder):
        return []
    return sorted((v for v in os.listdir(folder) if os.path.isdir(os.path.join(folder, v))), key=version_key)


def pick_version(folder, wanted, what):
    """The version folder to read: the one asked for, else the newest; None when the folder has none."""
    have = versions(folder)
    if not have:
        return None
    if wanted is None:
        return have[-1]
    if wanted in have:
        return wanted
    return None


def newest_per_kind(folder):
    """{kind: version} for the family's folder of one framework: each table kind from the newest version that
    holds it. A family's versions are collected apart and a newer one may hold only some kinds (B200's SGLang
    moe folder: 0.5.16 only DeepSeek-V4's MegaMoE module, 0.5.14 the fused MoE tables), so the newest folder
    alone would drop the others."""
    chosen = {}
    for v in versions(folder):  # oldest first: a newer version replaces an older one's kind
        for name in os.listdir(os.path.join(folder, v)):
            if name.endswith(".parquet"):
                chosen[name[: -len(".parquet")]] = v
    return chosen


def with_older_node_counts(folder, kind, newest, table):
    """A table keyed by node_num (DeepEP's) with, after its own rows, those of older versions at node counts no
    newer version measured, newest first: AIConfigurator collects each node count apart (SGLang 0.5.12's DeepEP
    tables time one node, 0.5.6.post2's 1 to 8), so the newest table alone would price no run across nodes.
    Returns the table and the versions read, newest first; each borrowed node count is named in the table's
    `rows_from`."""
    nodes = table["keys"].index("node_num")
    covered = {row[nodes] for row in table["rows"]}
    columns = table["keys"] + table["times"]
    read = [newest]
    for v in reversed([v for v in versions(folder) if version_key(v) < version_key(newest)]):
        path = os.path.join(folder, v, kind + ".parquet")
        if not os.path.isfile(path):
            continue
        older = convert(path, kind)
        if sorted(older["keys"] + older["times"]) != sorted(columns):
            continue  # another layout: its rows cannot stand beside these
        at = [(older["keys"] + older["times"]).index(c) for c in columns]
        index = older["keys"].index("node_num")
        borrowed = sorted({row[index] for row in older["rows"]} - covered)
        if not borrowed:
            continue
        table["rows"] += [[row[i] for i in at] for row in older["rows"] if row[index] in borrowed]
        table.setdefault("rows_from", []).append(
            {"file": path, "node_num": borrowed, "measured_on": older["measured_on"]})
        covered.update(borrowed)
        read.append(v)
    return table, read


def import_system(data, system, backend, version, nccl_version):
    """The tables to import, each as (its family, the versions read for it, the table)."""
    root = os.path.join(data, system)
    if not os.path.isdir(root):
        known = ", ".join(sorted(d for d in os.listdir(data) if os.path.isdir(os.path.join(data, d))))
        raise ImportError_(f"--system: no system '{system}' in {data}; systems: {known}")
    tables = []
    for family in sorted(os.listdir(root)):
        if not os.path.isdir(os.path.join(root, family)):
            continue
        folder = os.path.join(root, family, backend)
        if version is None:
            kinds = newest_per_kind(folder)
        else:
            chosen = pick_version(folder, version, family)
            kinds = {} if chosen is None else {
                name[: -len(".parquet")]: chosen
                for name in os.listdir(os.path.join(folder, chosen)) if name.endswith(".parquet")}
        for kind in sorted(kinds):
            table = convert(os.path.join(folder, kinds[kind], kind + ".parquet"), kind)
            read = [kinds[kind]]
            if version is None and "node_num" in table["keys"]:
                table, read = with_older_node_counts(folder, kind, kinds[kind], table)
            tables.append((family, read, table))
    if not tables:
        have = sorted(
            {v for f in os.listdir(root) if os.path.isdir(os.path.join(root, f))
             for v in versions(os.path.join(root, f, backend))},
            key=version_key,
        )
        if not have:
            raise ImportError_(f"--backend: {system} has no tables for '{backend}'")
        raise ImportError_(f"--version: {system} has no {backend} {version} tables; versions: {', '.join(have)}")
    nccl_folder = os.path.join(root, "comm", "nccl")
    chosen = pick_version(nccl_folder, nccl_version, "nccl")
    if nccl_version is not None and chosen is None:
        raise ImportError_(
            f"--nccl-version: {system} has no NCCL {nccl_version} tables; versions: {', '.join(versions(nccl_folder))}"
        )
    if chosen is not None:
        folder = os.path.join(nccl_folder, chosen)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".parquet"):
                tables.append(("nccl", [chosen], convert(os.path.join(folder, name), name[: -len(".parquet")])))
    return tables


def versions_used(picked):
    """{family: its versions, comma-separated} of the (family, version, table) imported."""
    used = {}
    for family, read, _ in picked:
        used.setdefault(family, set()).update(read)
    return {f: ", ".join(sorted(v, key=version_key)) for f, v in used.items()}


def system_gpu(data, system):
    """The measured GPU's memory bandwidth and capacity from AIConfigurator's <system>.yaml beside the data
    folder (gpu.mem_bw, gpu.mem_capacity), or {} when it is not there. Two plain numbers of the gpu section, read
    without a YAML parser (none is a dependency)."""
    path = os.path.join(os.path.dirname(os.path.abspath(data)), f"{system}.yaml")
    if not os.path.isfile(path):
        return {}
    found, in_gpu = {}, False
    with open(path) as f:
        for line in f:
            text = line.split("#", 1)[0].rstrip()
            if not text:
                continue
            if not text.startswith(" "):
                in_gpu = text == "gpu:"
                continue
            match = re.match(r"\s+(mem_bw|mem_capacity):\s*([0-9.eE+]+)$", text)
            if in_gpu and match:
                found[match.group(1)] = float(match.group(2))
    gpu = {}
    if found.get("mem_bw", 0) > 0:
        gpu["hbm_bytes_per_s"] = found["mem_bw"]
    if found.get("mem_capacity", 0) > 0:
        gpu["memory_bytes"] = found["mem_capacity"]
    return gpu


def write_folder(out, system, backend, used, package, data, tables):
    """The tables as a folder: manifest.json (what, from where, the tables and their row counts) and one
    <kind>.json a table, so that a reader loads only the kinds it prices. An existing file or non-empty
    folder is refused, never overwritten."""
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        raise ImportError_(f"--out: '{out}' exists; give a new folder (nothing is overwritten)")
    kinds = [t["kind"] for t in tables]
    duplicate = sorted({k for k in kinds if kinds.count(k) > 1})
    if duplicate:
        raise ImportError_(f"{system} {backend}: the kind {duplicate[0]} comes from two folders; give --version")
    # Written beside, then renamed: an import that fails half way leaves no half folder under the name.
    final, out = out, f"{out.rstrip('/')}.partial-{os.getpid()}"
    os.makedirs(out)
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "system": system,
        "software": backend,
        "versions": used,
        "source": {
            "name": "AIConfigurator",
            "package": f"{package} {package_version(package)}" if package else "a data folder",
            "data": os.path.abspath(data),
        },
        "tables": [],
    }
    gpu = system_gpu(data, system)
    if gpu:
        manifest["gpu"] = gpu
    for t in tables:
        name = t["kind"] + ".json"
        manifest["tables"].append({"kind": t["kind"], "file": name, "rows": len(t["rows"]), "from": t["file"]})
        with open(os.path.join(out, name), "w") as f:
            json.dump({"format": FORMAT, "format_version": FORMAT_VERSION, **t}, f, separators=(",", ":"))
            f.write("\n")
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    if os.path.isdir(final):
        os.rmdir(final)  # empty: checked above
    os.rename(out, final)


def relative(path, data):
    return os.path.relpath(path, data)


def list_data(data):
    lines = []
    for system in sorted(os.listdir(data)):
        root = os.path.join(data, system)
        if not os.path.isdir(root):
            continue
        backends = {}
        for family in sorted(os.listdir(root)):
            if not os.path.isdir(os.path.join(root, family)):
                continue
            for backend in sorted(os.listdir(os.path.join(root, family))):
                if os.path.isdir(os.path.join(root, family, backend)):
                    backends.setdefault(backend, set()).update(versions(os.path.join(root, family, backend)))
        for backend, vs in sorted(backends.items()):
            lines.append(f"{system:22} {backend:8} {', '.join(sorted(vs, key=version_key))}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="pipewright kernels import aiconfigurator")
    parser.add_argument("--system", help="AIConfigurator system: h100_sxm, h200_sxm, b200_sxm, gb200, ...")
    parser.add_argument("--backend", help="framework whose tables to read: vllm, sglang, trtllm")
    parser.add_argument("--version", help="framework version (default: each table kind's newest)")
    parser.add_argument("--nccl-version", help="NCCL version of the collective tables (default: the newest)")
    parser.add_argument("--data", help="AIConfigurator's systems/data folder (default: the installed package's)")
    parser.add_argument("--out", help="a new folder for the tables (manifest.json and a file per table)")
    parser.add_argument("--kinds", help="only these kinds, comma-separated: gemm_perf,nccl_perf,... (default: all)")
    parser.add_argument("--list", action="store_true", help="list the systems, frameworks and versions")
    args = parser.parse_args(argv)
    try:
        if args.data:
            if not os.path.isdir(args.data):
                raise ImportError_(f"--data: no folder '{args.data}'")
            data, package = args.data, None
        else:
            data, package = default_data_dir()
        if args.list:
            print(list_data(data))
            return 0
        for option in ("system", "backend", "out"):
            if not getattr(args, option):
                raise ImportError_(f"--{option.replace('_', '-')}: required (see --list for what is there)")
        picked = import_system(data, args.system, args.backend, args.version, args.nccl_version)
        if args.kinds:
            wanted = [k for k in args.kinds.split(",") if k]
            there = [t["kind"] for _, _, t in picked]
            absent = [k for k in wanted if k not in there]
            if absent:
                raise ImportError_(f"--kinds: no {absent[0]} table in {args.system} {args.backend}; "
                                   f"the kinds there: {', '.join(sorted(there))}")
            picked = [p for p in picked if p[2]["kind"] in wanted]
        used = versions_used(picked)  # of what is kept
        tables = [t for _, _, t in picked]
        for t in tables:
            t["file"] = relative(t["file"], data)
            for borrowed in t.get("rows_from", []):
                borrowed["file"] = relative(borrowed["file"], data)
        write_folder(args.out, args.system, args.backend, used, package, data, tables)
        rows = sum(len(t["rows"]) for t in tables)
        print(f"{len(tables)} tables, {rows} rows, from {args.system} {args.backend} "
              f"({', '.join(f'{k} {v}' for k, v in sorted(used.items()))})")
        return 0
    except ImportError_ as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code


if __name__ == "__main__":
    sys.exit(main())
