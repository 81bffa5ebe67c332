"""pipewright.torch.profile on real PyTorch layers: the bytes against their closed forms, B and W split as
zero-bubble schedules split them (the same gradients as one backward), the files pipewright reads back and
plans with, the argument errors, and the link and collectives between two gloo processes."""

import importlib
import json
import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import pipewright
from pipewright.torch import profile

F32 = 4  # bytes of a float32
QUICK = {"repeats": 3, "warmup": 1, "min_time": 0.0}


@pytest.fixture(autouse=True)
def one_thread():
    # Two torch threads on a machine whose other core is busy wait on each other for milliseconds; the
    # profiler's own measurements are of one thread per rank, as the C++ profiler's.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def mlp(b=4, d_in=16, d_hidden=32, d_out=8):
    torch.manual_seed(0)
    layers = [torch.nn.Linear(d_in, d_hidden), torch.nn.ReLU(), torch.nn.Linear(d_hidden, d_out)]
    return layers, torch.randn(b, d_in)


def test_linear_layers_bytes_are_their_closed_forms_and_the_relu_has_no_w(tmp_path):
    b, d_in, d_hidden, d_out = 4, 16, 32, 8
    layers, x = mlp(b, d_in, d_hidden, d_out)
    out, model_out = tmp_path / "p.json", tmp_path / "m.json"
    p = profile(layers, x, out=out, model_out=model_out, **QUICK)
    first, relu, last = p["layers"]
    # Linear keeps its input for W (dW = dY^T X) and nothing else of its own: its weight is no activation.
    assert first["activation_bytes"] == b * d_in * F32
    # B leaves W the input and the output's gradient.
    assert first["weight_grad_bytes"] == b * d_in * F32 + b * d_hidden * F32
    assert first["output_bytes"] == b * d_hidden * F32
    # ReLU keeps its output (its gradient's mask), has no weights and so no W, and keeps nothing past B.
    assert relu["activation_bytes"] == b * d_hidden * F32
    assert relu["weight_grad_bytes"] == 0
    runs = relu["forward"]["repetitions"]
    assert relu["backward_weight"] == {"median_s": 0.0, "p10_s": 0.0, "p90_s": 0.0, "repetitions": runs}
    assert last["activation_bytes"] == b * d_hidden * F32
    assert last["weight_grad_bytes"] == b * d_hidden * F32 + b * d_out * F32
    assert last["output_bytes"] == 0  # the pipeline's last layer sends nothing on
    for entry in (first, last):
        for phase in ("forward", "backward_input", "backward_weight"):
            t = entry[phase]
            assert 0 < t["p10_s"] <= t["median_s"] <= t["p90_s"] and t["repetitions"] >= QUICK["repeats"]
    assert relu["forward"]["median_s"] > 0 and relu["backward_input"]["median_s"] > 0
    assert [e["micro_batch_size"] for e in p["layers"]] == [b, b, b]
    assert p["optimizer_s_per_parameter"] > 0
    assert p["links"] == [] and "model" not in p
    assert json.loads(out.read_text()) == p
    # Parameter bytes, exact: (in x out weights + out biases) float32s; ReLU has none.
    model = json.loads(model_out.read_text())
    assert [layer["parameter_bytes"] for layer in model["layers"]] == [
        (d_in * d_hidden + d_hidden) * F32,
        0,
        (d_hidden * d_out + d_out) * F32,
    ]
    assert [layer["forward_s"] for layer in model["layers"]] == [e["forward"]["median_s"] for e in p["layers"]]


def test_the_files_load_and_simulate_with_the_measured_times(tmp_path):
    layers, x = mlp()
    out, model_out = tmp_path / "p.json", tmp_path / "m.json"
    p = profile(layers, x, out=out, model_out=model_out, **QUICK)
    result = pipewright.simulate(model=model_out, cluster="ideal", pp=3, microbatches=4, profile=out)
    assert result["cost_model"]["profile"]["path"] == os.path.abspath(out)
    assert result["cost_model"]["profile"]["tool"] == p["tool"]
    # One layer per stage: each stage's F, B and W are that layer's medians.
    for stage, entry in zip(result["stages"], p["layers"]):
        assert stage["forward_s"] == pytest.approx(entry["forward"]["median_s"])
        assert stage["backward_input_s"] == pytest.approx(entry["backward_input"]["median_s"])
        assert stage["backward_weight_s"] == pytest.approx(entry["backward_weight"]["median_s"])
        # B and W as one pass: what a BW action costs, where it was measured below B + W.
        bw = entry["backward"]["median_s"]
        if bw < entry["backward_input"]["median_s"] + entry["backward_weight"]["median_s"]:
            assert stage["full_backward_s"] == pytest.approx(bw)
        else:
            assert "full_backward_s" not in stage


def test_b_and_w_apart_give_the_gradients_of_one_backward():
    split = importlib.import_module("pipewright.torch._measure")._Backward
    torch.manual_seed(0)
    block = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    params = list(block.parameters())
    x = torch.randn(2, 5, 16, requires_grad=True)
    y = block(x)
    dy = torch.randn_like(y)
    expected = torch.autograd.grad(y, [x, *params], dy)
    x2 = x.detach().requires_grad_()
    backward = split([block(x2)], [dy], [x2], params)
    got = [*backward.input_grad(), *backward.weight_grad()]
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)
    # And as one pass (the full backward a BW action runs).
    x3 = x.detach().requires_grad_()
    whole = split([block(x3)], [dy], [x3], params).full()
    assert len(whole) == len(expected)
    for a, b in zip(whole, expected):
        torch.testing.assert_close(a, b)


def test_w_does_the_weight_gemms_and_none_of_b():
    # Three Linears in a row: B is their three input-gradient GEMMs, W their three weight-gradient GEMMs;
    # W started from one autograd call over all weights would redo two of B's (each upper start's path to
    # the start below it), 5 GEMMs.
    from torch.utils.flop_counter import FlopCounterMode

    split = importlib.import_module("pipewright.torch._measure")._Backward
    b, d = 8, 16
    chain = torch.nn.Sequential(*[torch.nn.Linear(d, d) for _ in range(3)])
    x = torch.randn(b, d, requires_grad=True)
    y = chain(x)
    backward = split([y], [torch.randn_like(y)], [x], list(chain.parameters()))
    with FlopCounterMode(display=False) as flops_b:
        backward.input_grad()
    with FlopCounterMode(display=False) as flops_w:
        backward.weight_grad()
    gemm = 2 * b * d * d
    assert (flops_b.get_total_flops(), flops_w.get_total_flops()) == (3 * gemm, 3 * gemm)


class _Recording:
    """A clock on the host that writes down what each mark follows."""

    def __init__(self, log):
        self.log, self.cuda = log, False

    def start(self):
        pass

    def mark(self):
        self.log.append("mark")
        return len(self.log)

    def seconds(self, pairs):
        return [float(b - a) for a, b in pairs]


class _Logged(torch.nn.Module):
    """A Linear that writes down its F, B and W (B: the input's gradient; W: the weight's)."""

    def __init__(self, name, log):
        super().__init__()
        self.name, self.log, self.linear = name, log, torch.nn.Linear(4, 4, bias=False)
        self.linear.weight.register_hook(lambda g: self.log.append(f"{self.name}W"))

    def forward(self, x):
        self.log.append(f"{self.name}F")
        if x.requires_grad:
            x.register_hook(lambda g: self.log.append(f"{self.name}B"))
        return self.linear(x)


def test_a_pass_runs_f_in_layer_order_then_b_then_w_in_reverse_each_between_two_marks():
    # As inside a stage: between two runs of a layer's phase the other layers' phases run; each phase is
    # timed alone (between its two marks); after B and W apart, F again (not timed) and B and W as one pass
    # in reverse order; groups of layers are passed one after the other.
    measure = importlib.import_module("pipewright.torch._measure")
    log = []
    layers = [_Logged(name, log) for name in "abc"]
    x, measured, generator = torch.randn(2, 4), [], torch.Generator().manual_seed(0)
    for layer in layers:
        measured.append(measure._Layer(layer, x, generator))
        x = measured[-1].output
    log.clear()
    seconds = measure._one_pass(measured, [[0, 1], [2]], _Recording(log))
    # What ran between marks (timed: a closed pair) and outside them, each pair's work as a set.
    timed, untimed, inside = [], [], None
    for event in log:
        if event == "mark":
            if inside is None:
                inside = set()
            else:
                timed.append(inside)
                inside = None
        elif inside is None:
            untimed.append(event)
        else:
            inside.add(event)
    assert timed == [{"aF"}, {"bF"}, {"bB"}, {"aB"}, {"bW"}, {"aW"}, {"bB", "bW"}, {"aB", "aW"},
                     {"cF"}, {"cB"}, {"cW"}, {"cB", "cW"}]
    assert untimed == ["aF", "bF", "cF"]
    assert all(len(s) == 4 and all(t > 0 for t in s) for s in seconds)


def test_pass_groups_hold_at_most_the_budget_and_each_at_least_one_layer():
    measure = importlib.import_module("pipewright.torch._measure")
    layers = [{"activation_bytes": k, "weight_grad_bytes": 1} for k in (2, 3, 9, 0, 1, 1)]
    assert measure._pass_groups(layers, 7) == [[0, 1], [2], [3, 4, 5]]
    assert measure._pass_groups(layers, 100) == [[0, 1, 2, 3, 4, 5]]
    assert measure._pass_groups(layers, 0) == [[0], [1], [2], [3], [4], [5]]


def test_a_flush_writes_twice_the_last_level_cache_sysfs_lists(tmp_path):
    measure = importlib.import_module("pipewright.torch._measure")
    for index, size in (("index0", "48K"), ("index2", "2048K"), ("index3", "32768K")):
        (tmp_path / index).mkdir()
        (tmp_path / index / "size").write_text(size + "\n")
    cpu = torch.device("cpu")
    assert measure.last_level_cache_bytes(cpu, str(tmp_path)) == 32 * 2**20
    assert measure.CacheFlush(cpu, cpu_caches=str(tmp_path)).buffer.numel() == 64 * 2**20
    assert measure.last_level_cache_bytes(cpu, str(tmp_path / "none")) is None
    # Within 8 MiB and 512 MiB; 64 MiB where the cache is unknown.
    assert [measure.CacheFlush.bytes_for(c) for c in (2**20, 1024 * 2**20, None)] == [8 * 2**20, 512 * 2**20,
                                                                                      64 * 2**20]


def test_the_profile_says_how_its_layers_were_timed():
    layers, x = mlp()
    assert profile(layers, x, **QUICK)["tool"].endswith(", pass timing)")
    assert profile(layers, x, timing="repeated", **QUICK)["tool"].endswith(", repeated timing)")


class Block(torch.nn.Module):
    """A Llama decoder layer as a pipeline stage runs it: hidden states in, hidden states out."""

    def __init__(self, config, index):
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

        self.layer = LlamaDecoderLayer(config, index)
        self.rotary = LlamaRotaryEmbedding(config)

    def forward(self, h):
        positions = torch.arange(h.shape[1], device=h.device)[None]
        return self.layer(h, position_embeddings=self.rotary(h, positions), position_ids=positions)


class Head(torch.nn.Module):
    """Final norm, LM head and cross-entropy, as pipewright's head."""

    def __init__(self, config):
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaRMSNorm

        self.norm = LlamaRMSNorm(config.hidden_size)
        self.lm_head = torch.nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, h):
        logits = self.lm_head(self.norm(h)).flatten(0, 1)
        return torch.nn.functional.cross_entropy(logits, torch.zeros(len(logits), dtype=torch.long))


def test_a_transformers_llama_plans_with_its_measured_layers(tmp_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=172, vocab_size=256,
        num_hidden_layers=2, max_position_embeddings=64, attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    layers = [torch.nn.Embedding(256, 64), Block(config, 0), Block(config, 1), Head(config)]
    out = tmp_path / "llama.json"
    p = profile(layers, torch.randint(0, 256, (2, 32)), model=config, out=out, **QUICK)
    embedding, block, head = p["layers"]
    assert [e["kind"] for e in p["layers"]] == ["embedding", "block", "head"]
    assert block["shape"] == ("hidden=64 heads=4 kv_heads=2 head_dim=16 ffn=172 mlp=swiglu norm=rmsnorm bias=none "
                              "positions=rotary")
    assert {(e["micro_batch_size"], e["seq_len"]) for e in p["layers"]} == {(2, 32)}
    # Both blocks' runs in the one block entry.
    assert block["forward"]["repetitions"] == 2 * head["forward"]["repetitions"] == 2 * QUICK["repeats"]
    # Token ids take no gradient: the embedding has no B; its W is its whole backward.
    assert embedding["backward_input"]["median_s"] == 0 and embedding["backward_weight"]["median_s"] > 0
    assert embedding["activation_bytes"] == 2 * 32 * 8  # the int64 ids it gathers the gradient rows by
    assert embedding["output_bytes"] == 2 * 32 * 64 * F32 and head["output_bytes"] == 0
    assert p["model"]["layer_kinds"] == "embedding,block,head" and p["model"]["seq_len"] == 64
    result = pipewright.simulate(model=config, cluster="ideal", pp=2, microbatches=4, micro_batch_size=2, seq_len=32,
                                 profile=out)
    coverage = result["cost_model"]["coverage"][0]
    assert coverage["profiled"] == ["embedding", "block", "head"] and coverage["fallback"] == []
    measured = embedding["forward"]["median_s"] + 2 * block["forward"]["median_s"] + head["forward"]["median_s"]
    assert sum(s["forward_s"] for s in result["stages"]) == pytest.approx(measured)


def test_an_existing_out_file_is_replaced_as_the_cli_does(tmp_path):
    out = tmp_path / "new" / "p.json"
    out.parent.mkdir()
    out.write_text("old")
    layers, x = mlp()
    profile(layers[:1], x, out=out, **QUICK)
    assert json.loads(out.read_text())["format"] == "pipewright-profile"
    assert sorted(os.listdir(out.parent)) == ["p.json"]  # no temporary left beside it


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"repeats": 0}, "repeats: must be a whole number of 1 or more, got 0"),
        ({"min_time": -1}, "min_time: must be 0 or more seconds, got -1"),
        ({"timing": "cold"}, "timing: must be 'pass' or 'repeated', got 'cold'"),
        (
            {"kinds": ["block"]},
            "kinds: name layers of a pipewright model; pass model= too (a preset, path, dict or transformers config)",
        ),
        ({"link_sizes": [1024]}, "link_sizes: give 2 different message sizes or more, in whole bytes, got [1024]"),
        ({"dtype": torch.int8}, "dtype: must be a floating torch dtype such as torch.bfloat16, got torch.int8"),
        ({"runtime": "yes"}, "runtime: must be True or False, got 'yes'"),
    ],
)
def test_bad_settings_name_the_argument_and_the_fix(settings, message):
    with pytest.raises(pipewright.PipewrightError) as e:
        profile([torch.nn.Linear(2, 2)], torch.zeros(1, 2), **settings)
    assert (str(e.value), e.value.kind, e.value.exit_code) == (message, "input", 2)


def test_bad_layers_and_outputs_fail_before_any_work(tmp_path):
    with pytest.raises(pipewright.PipewrightError, match=r"^layers: got one module; pass the pipeline's layers"):
        profile(torch.nn.Linear(2, 2), torch.zeros(1, 2))
    with pytest.raises(pipewright.PipewrightError) as e:
        profile([torch.nn.Linear(2, 2)], torch.zeros(1, 2), out=tmp_path)
    assert str(e.value) == f"out: '{tmp_path}' is a folder; give a file name"
    with pytest.raises(pipewright.PipewrightError) as e:
        profile([torch.nn.Linear(2, 2)], torch.zeros(1, 2), model="no-such-model")
    assert str(e.value).startswith("model: ")
    assert not list(tmp_path.iterdir())


def _profile_on_rank(rank, folder):
    torch.set_num_threads(1)
    # A file rendezvous: a port picked free and bound later could be taken meanwhile by another test's
    # processes (ctest runs two at once), and gloo then aborts.
    dist.init_process_group("gloo", init_method="file://" + os.path.join(folder, "rendezvous"), rank=rank, world_size=2)
    torch.manual_seed(0)
    p = profile([torch.nn.Linear(8, 8)], torch.randn(2, 8), out=os.path.join(folder, "p.json"),
                link_sizes=[1024, 16384, 262144], link_repeats=3, **QUICK)
    with open(os.path.join(folder, f"returned{rank}.json"), "w") as f:
        json.dump(p, f)
    # Both ranks have written what the test reads; each then leaves without torch's gloo teardown, which now and
    # then aborts the process on this 2-core VM ("terminate called without an active exception", in the process
    # group's and its store's destruction, after every result is on disk: one clean-clone CI run in four).
    dist.barrier()
    os._exit(0)


def test_two_gloo_ranks_measure_their_link_and_collectives(tmp_path):
    mp.spawn(_profile_on_rank, args=(str(tmp_path),), nprocs=2)
    p = json.loads((tmp_path / "p.json").read_text())
    # Every rank returns what rank 0 wrote.
    for rank in (0, 1):
        assert json.loads((tmp_path / f"returned{rank}.json").read_text()) == p
    (link,) = p["links"]
    assert (link["src"], link["dst"]) == (0, 1)
    assert [s["bytes"] for s in link["samples"]] == [1024, 16384, 262144]
    assert all(s["time_s"] > 0 for s in link["samples"])
    assert link["latency_s"] >= 0 and link["bandwidth_bytes_per_s"] > 0
    kinds = {(c["kind"], c["bytes"]) for c in p["collectives"]}
    assert kinds == {(k, b) for k in ("all_reduce", "all_gather", "reduce_scatter") for b in (1024, 16384, 262144)}
    for c in p["collectives"]:
        assert c["ranks"] == 2 and c["time_s"] > 0
        assert c["link"] == {"bandwidth_bytes_per_s": link["bandwidth_bytes_per_s"], "latency_s": link["latency_s"]}
    # torch.distributed.pipelining's time per compute call and per posted send, measured on rank 0's CPU:
    # Python's loop and bookkeeping between calls and gloo's asynchronous send issued from the rank's thread,
    # tens to hundreds of microseconds, never a layer's milliseconds.
    assert p["runtime"]["name"] == f"torch.distributed.pipelining {torch.__version__}"
    assert 1e-6 < p["runtime"]["action_s"] < 5e-3
    assert 0 <= p["runtime"]["transfer_s"] < 5e-3
    # pipewright reads the link and the runtime back: a simulation with the profile runs.
    model = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "tiny-uniform.json")
    result = pipewright.simulate(model=model, cluster="ideal", pp=2, microbatches=4, profile=tmp_path / "p.json")
    assert result["cost_model"]["profile"]["tool"] == p["tool"]


@pytest.mark.parametrize("name", ["tiny-moe", "tiny-gpt"])
def test_entries_are_keyed_as_pipewright_profile_keys_its_own(tmp_path, name):
    model = os.path.join(os.path.dirname(__file__), "..", "..", "examples", f"{name}.json")
    theirs = tmp_path / "cpu.json"
    pipewright.run(["profile", "--model", model, "--min-time", "0.001", "--link-repetitions", "1", "--out", theirs])
    reference = json.loads(theirs.read_text())
    kinds = [entry["kind"] for entry in reference["layers"]]
    # Stand-ins for the model's layers: only the keys are compared here.
    stand_ins = [torch.nn.Linear(4, 4) for _ in kinds]
    p = profile(stand_ins, torch.randn(1, 32, 4), model=model, kinds=kinds, **QUICK)
    assert [(e["kind"], e["shape"]) for e in p["layers"]] == [(e["kind"], e["shape"]) for e in reference["layers"]]
    assert p["model"] == reference["model"]
    assert {(e["micro_batch_size"], e["seq_len"]) for e in p["layers"]} == {(1, 32)}
