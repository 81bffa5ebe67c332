"""pipewright.kernels.aiconfigurator against the real aiconfigurator-core package (pinned in
python/requirements-data.txt) and against files made here that are not what it expects."""

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipewright.kernels import aiconfigurator as aic


def data_dir():
    return aic.default_data_dir()[0]


def test_h200_vllm_gemm_rows_are_the_published_ones_in_seconds(tmp_path):
    out = tmp_path / "h200"
    assert aic.main(["--system", "h200_sxm", "--backend", "vllm", "--version", "0.24.0", "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "pipewright-kernel-table" and manifest["format_version"] == 1
    assert manifest["source"]["package"] == "aiconfigurator_core 0.12.0"
    assert manifest["versions"]["gemm"] == "0.24.0" and manifest["versions"]["nccl"] == "2.29.2"
    # The measured GPU as AIConfigurator's h200_sxm.yaml gives it: 4.8 TB/s and 141 GiB.
    assert manifest["gpu"] == {"hbm_bytes_per_s": 4.8e12, "memory_bytes": 151397597184.0}
    gemm = json.loads((out / "gemm_perf.json").read_text())
    assert gemm["keys"] == ["op_name", "kernel_source", "gemm_dtype", "m", "n", "k"]
    assert gemm["times"] == ["time_s"]
    assert gemm["measured_on"] == {"framework": "VLLM", "version": "0.24.0", "device": "NVIDIA H200"}
    # The parquet row, read directly: its latency in ms is the table's time in s times 1000.
    source = pq.read_table(os.path.join(data_dir(), "h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet")).to_pylist()
    row = next(r for r in source if (r["gemm_dtype"], r["m"], r["n"], r["k"]) == ("bfloat16", 4096, 12288, 4096))
    mine = next(r for r in gemm["rows"] if r[2:6] == ["bfloat16", 4096, 12288, 4096])
    assert mine[6] == row["latency"] * 1e-3
    assert len(gemm["rows"]) == len(source)
    listed = {t["kind"]: t["rows"] for t in manifest["tables"]}
    assert listed["gemm_perf"] == len(source)
    # Every family's 0.24.0 tables (kda has none of that version) and NCCL 2.29.2's.
    assert "kda_perf" not in listed
    assert sum(listed.values()) == 360636


@pytest.mark.parametrize("system,expected", [("h100_sxm", (106, 1601920)), ("h200_sxm", (105, 1540232)),
                                             ("b200_sxm", (99, 1833358))])
def test_every_table_of_h100_h200_and_b200_is_read(system, expected):
    """Every parquet file the package ships for the system, of every framework and version: none refused, every
    row kept with a value a column."""
    files = rows = 0
    for dirpath, _, names in os.walk(os.path.join(data_dir(), system)):
        for name in names:
            if not name.endswith(".parquet"):
                continue
            path = os.path.join(dirpath, name)
            table = aic.convert(path, name[: -len(".parquet")])
            assert len(table["rows"]) == pq.read_metadata(path).num_rows
            assert all(len(r) == len(table["keys"]) + len(table["times"]) for r in table["rows"])
            files += 1
            rows += len(table["rows"])
    # docs/kernel-tables.md counts them by kind.
    assert (files, rows) == expected


def write_parquet(path, columns):
    pq.write_table(pa.table(columns), path)


def test_a_negative_time_is_refused_naming_the_file_and_row(tmp_path, capsys):
    folder = tmp_path / "data/h200_sxm/gemm/vllm/0.24.0"
    folder.mkdir(parents=True)
    bad = folder / "gemm_perf.parquet"
    write_parquet(bad, {"gemm_dtype": ["bfloat16", "bfloat16"], "m": [1, 2], "latency": [0.5, -1.0]})
    code = aic.main(["--data", str(tmp_path / "data"), "--system", "h200_sxm", "--backend", "vllm",
                     "--out", str(tmp_path / "out")])
    assert code == 2
    assert capsys.readouterr().err == f"error: {bad} row 2: 'latency' is -1.0, not a time\n"
    assert not (tmp_path / "out").exists()


def test_a_foreign_file_is_refused_in_one_line(tmp_path, capsys):
    folder = tmp_path / "data/h200_sxm/gemm/vllm/0.24.0"
    folder.mkdir(parents=True)
    foreign = folder / "gemm_perf.parquet"
    write_parquet(foreign, {"name": ["a"], "size": [3]})
    not_parquet = folder / "notes.parquet"
    not_parquet.write_text("not parquet")
    code = aic.main(["--data", str(tmp_path / "data"), "--system", "h200_sxm", "--backend", "vllm",
                     "--out", str(tmp_path / "out")])
    assert code == 2
    assert capsys.readouterr().err == (
        f"error: {foreign}: no time column (latency, avg_ms, *_ms or *_us); not an AIConfigurator perf table\n"
    )
    foreign.unlink()
    code = aic.main(["--data", str(tmp_path / "data"), "--system", "h200_sxm", "--backend", "vllm",
                     "--out", str(tmp_path / "out")])
    assert code == 2
    assert capsys.readouterr().err.startswith(f"error: {not_parquet}: not a readable parquet file (")


def test_an_existing_folder_is_never_overwritten(tmp_path, capsys):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    code = aic.main(["--system", "h200_sxm", "--backend", "vllm", "--out", str(out)])
    assert code == 2
    assert capsys.readouterr().err == f"error: --out: '{out}' exists; give a new folder (nothing is overwritten)\n"
    assert (out / "mine.txt").read_text() == "keep"


def test_versions_follow_their_natural_order():
    assert sorted(["1.3.0rc20", "1.3.0rc9", "1.2.0rc5", "1.3.0rc11"], key=aic.version_key) == [
        "1.2.0rc5", "1.3.0rc9", "1.3.0rc11", "1.3.0rc20"]
    assert sorted(["0.5.6.post2", "0.5.10", "0.5.9"], key=aic.version_key) == ["0.5.6.post2", "0.5.9", "0.5.10"]


def test_the_measured_gpu_is_read_from_the_system_file_beside_the_data(tmp_path):
    data = tmp_path / "systems" / "data"
    data.mkdir(parents=True)
    (tmp_path / "systems" / "x_sxm.yaml").write_text(
        "data_dir: data/x_sxm # relative\ngpu:\n  mem_bw: 2039000000000 # 2.039TB/s\n"
        "  mem_bw_empirical_scaling_factor: 0.8\n  mem_capacity: 85899345920\nnode:\n  mem_bw: 1\n")
    assert aic.system_gpu(str(data), "x_sxm") == {"hbm_bytes_per_s": 2.039e12, "memory_bytes": 85899345920.0}
    assert aic.system_gpu(str(data), "absent") == {}


def test_kinds_keeps_only_those_and_refuses_one_not_there(tmp_path, capsys):
    out = tmp_path / "gemms"
    assert aic.main(["--system", "h100_sxm", "--backend", "vllm", "--kinds", "gemm_perf,nccl_perf", "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert [t["kind"] for t in manifest["tables"]] == ["gemm_perf", "nccl_perf"]
    # The versions of what was kept, not of every family there.
    assert manifest["versions"] == {"gemm": "0.24.0", "nccl": "2.29.2"}
    assert sorted(os.listdir(out)) == ["gemm_perf.json", "manifest.json", "nccl_perf.json"]
    assert aic.main(["--system", "h100_sxm", "--backend", "vllm", "--kinds", "gemm_perff", "--out",
                     str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --kinds: no gemm_perff table in h100_sxm vllm; the kinds there: ")
    assert not (tmp_path / "none").exists()


def test_each_kind_comes_from_the_newest_version_that_holds_it(tmp_path):
    """A family's newer version may hold only some of its kinds (B200's SGLang moe folder: 0.5.16 only a MegaMoE
    module, 0.5.14 the fused MoE table): without --version each kind is its newest; with it, that version's alone."""
    moe = tmp_path / "data/x_sxm/moe/sglang"
    for version, kinds in (("0.5.9", ["moe_perf", "old_perf"]), ("0.5.14", ["moe_perf"]), ("0.5.16", ["mega_perf"])):
        (moe / version).mkdir(parents=True)
        for kind in kinds:
            write_parquet(moe / version / f"{kind}.parquet", {"num_tokens": [1], "latency": [float(len(version))]})
    out = tmp_path / "newest"
    assert aic.main(["--data", str(tmp_path / "data"), "--system", "x_sxm", "--backend", "sglang", "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["versions"] == {"moe": "0.5.9, 0.5.14, 0.5.16"}
    assert {t["kind"]: t["from"] for t in manifest["tables"]} == {
        "mega_perf": "x_sxm/moe/sglang/0.5.16/mega_perf.parquet",
        "moe_perf": "x_sxm/moe/sglang/0.5.14/moe_perf.parquet",
        "old_perf": "x_sxm/moe/sglang/0.5.9/old_perf.parquet"}
    # 0.5.14's row: its latency 6 ms (the version's length, written above) in seconds.
    assert json.loads((out / "moe_perf.json").read_text())["rows"] == [[1, 0.006]]
    pinned = tmp_path / "pinned"
    assert aic.main(["--data", str(tmp_path / "data"), "--system", "x_sxm", "--backend", "sglang", "--version", "0.5.9",
                     "--out", str(pinned)]) == 0
    manifest = json.loads((pinned / "manifest.json").read_text())
    assert manifest["versions"] == {"moe": "0.5.9"}
    assert sorted(t["kind"] for t in manifest["tables"]) == ["moe_perf", "old_perf"]


def test_node_counts_only_an_older_version_measured_join_the_newest_table(tmp_path):
    """DeepEP's tables are collected per node count apart (SGLang 0.5.12 within a node, 0.5.6.post2 over 1 to 8):
    the newest version's rows, then an older version's at node counts none newer measured, named in rows_from."""
    comm = tmp_path / "data/x_sxm/comm/sglang"
    columns = lambda nodes, us: {"node_num": nodes, "num_token": [1] * len(nodes), "dispatch_transmit_us": us}
    (comm / "0.5.6.post2").mkdir(parents=True)
    (comm / "0.5.12").mkdir(parents=True)
    # The older file lists its columns in another order: they are matched by name.
    old = columns([1, 2, 8], [10.0, 20.0, 80.0])
    write_parquet(comm / "0.5.6.post2/wideep_deepep_normal_perf.parquet",
                  {"dispatch_transmit_us": old["dispatch_transmit_us"], "num_token": old["num_token"],
                   "node_num": old["node_num"]})
    write_parquet(comm / "0.5.12/wideep_deepep_normal_perf.parquet", columns([1], [5.0]))
    out = tmp_path / "merged"
    assert aic.main(["--data", str(tmp_path / "data"), "--system", "x_sxm", "--backend", "sglang", "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["versions"] == {"comm": "0.5.6.post2, 0.5.12"}
    table = json.loads((out / "wideep_deepep_normal_perf.json").read_text())
    assert table["keys"] == ["node_num", "num_token"]
    assert table["rows"] == [[1, 1, pytest.approx(5e-6)], [2, 1, pytest.approx(2e-5)], [8, 1, pytest.approx(8e-5)]]
    assert [(r["file"], r["node_num"]) for r in table["rows_from"]] == [
        ("x_sxm/comm/sglang/0.5.6.post2/wideep_deepep_normal_perf.parquet", [2, 8])]
    # With --version, that version's table alone.
    pinned = tmp_path / "pinned"
    assert aic.main(["--data", str(tmp_path / "data"), "--system", "x_sxm", "--backend", "sglang", "--version", "0.5.12",
                     "--out", str(pinned)]) == 0
    assert json.loads((pinned / "wideep_deepep_normal_perf.json").read_text())["rows"] == [[1, 1, pytest.approx(5e-6)]]


def test_h100_deepep_tables_reach_eight_nodes(tmp_path):
    out = tmp_path / "deepep"
    assert aic.main(["--system", "h100_sxm", "--backend", "sglang", "--kinds", "wideep_deepep_normal_perf",
                     "--out", str(out)]) == 0
    table = json.loads((out / "wideep_deepep_normal_perf.json").read_text())
    nodes = table["keys"].index("node_num")
    assert sorted({row[nodes] for row in table["rows"]}) == [1, 2, 4, 8]
    # 0.5.12's 2,484 rows within a node and 0.5.6.post2's 138 at each of 2, 4 and 8 nodes.
    assert len(table["rows"]) == 2484 + 3 * 138
    assert table["measured_on"]["version"] == "0.5.12"
    assert table["rows_from"][0]["measured_on"] == {"framework": "sglang", "version": "0.5.0", "device": "NVIDIA H100"}
