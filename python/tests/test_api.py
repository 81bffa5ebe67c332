"""The pipewright module against the pipewright command: the same settings give the same JSON, bad settings
raise PipewrightError with the command's one-line message, and configuration objects stand in for files."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import transformers

import pipewright
from pipewright import _core

ROOT = Path(__file__).resolve().parents[2]
# The command of the same build (ctest sets it; tests/CMakeLists.txt).
CLI = os.environ.get("PIPEWRIGHT_CLI", str(ROOT / "build" / "cli" / "pipewright"))

PLAN = dict(model="gpt3-175b", cluster="dgx-a100-80gb", gpus=1024, global_batch_size=1536)
SIMULATE = dict(model="gpt3-175b", cluster="dgx-a100-80gb", tp=8, pp=16, dp=8, vpp=3, schedule="interleaved",
                global_batch_size=1536, recompute="full")
SERVE = dict(model=str(ROOT / "examples" / "llama3.1-70b.config.json"),
             cluster=str(ROOT / "examples" / "cluster-2x-h100.json"), gpus=16, requests=256, prompt_tokens=1024,
             output_tokens=128)


def command(*args: str) -> dict:
    done = subprocess.run([CLI, *args], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_plan_is_the_commands_json():
    assert pipewright.plan(**PLAN) == command(
        "plan", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--gpus", "1024", "--global-batch-size",
        "1536", "--json")


def test_simulate_is_the_commands_json():
    assert pipewright.simulate(**SIMULATE) == command(
        "simulate", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--tp", "8", "--pp", "16", "--dp", "8",
        "--vpp", "3", "--schedule", "interleaved", "--global-batch-size", "1536", "--recompute", "full", "--json")


def test_serve_simulate_and_serve_plan_are_the_commands_json():
    args = ["--model", SERVE["model"], "--cluster", SERVE["cluster"], "--requests", "256", "--prompt-tokens",
            "1024", "--output-tokens", "128", "--json"]
    assert pipewright.serve_plan(**SERVE) == command("serve", "plan", "--gpus", "16", *args)
    one = {k: v for k, v in SERVE.items() if k != "gpus"}
    assert pipewright.serve_simulate(tp=4, pp=2, **one) == command("serve", "simulate", "--tp", "4", "--pp", "2", *args)


def test_catalogs_and_loaders_are_the_commands():
    assert pipewright.models() == command("models", "--json")["models"]
    assert pipewright.clusters() == command("clusters", "--json")["clusters"]
    assert pipewright.load_model("llama3-8b") == command("models", "--show", "llama3-8b")
    assert pipewright.load_cluster("dgx-h100") == command("clusters", "--show", "dgx-h100")


def test_bad_settings_raise_the_commands_one_line_message():
    with pytest.raises(pipewright.PipewrightError) as error:
        pipewright.plan(modle="gpt3-175b", cluster="dgx-a100-80gb", gpus=8)
    assert str(error.value) == "plan: unknown option --modle; did you mean --model?"
    assert (error.value.kind, error.value.exit_code) == ("input", 2)
    with pytest.raises(pipewright.PipewrightError) as error:
        pipewright.plan(model="gpt3-175b", cluster="dgx-a100-80gb", gpus=1000, global_batch_size=128)
    done = subprocess.run([CLI, "plan", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--gpus", "1000",
                           "--global-batch-size", "128"], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr == f"error: {error.value}\n"


def test_the_error_survives_pickling():
    import pickle

    with pytest.raises(pipewright.PipewrightError) as error:
        pipewright.plan(modle="gpt3-175b")
    back = pickle.loads(pickle.dumps(error.value))
    assert (str(back), back.kind, back.exit_code, back.details) == (
        str(error.value), error.value.kind, error.value.exit_code, error.value.details)


def test_a_missing_file_is_a_runtime_or_input_error_naming_it(tmp_path):
    missing = tmp_path / "nowhere.json"
    with pytest.raises(pipewright.PipewrightError) as error:
        pipewright.load_model(missing)
    assert str(missing) in str(error.value)
    assert error.value.exit_code in (1, 2) and error.value.kind == {1: "runtime", 2: "input"}[error.value.exit_code]


def test_values_become_the_commands_spellings():
    # A list for a comma-separated value, True for a flag, a float that is whole as an integer.
    listed = pipewright.plan(precisions=["bf16", "fp8"], **{**PLAN, "cluster": "dgx-h100", "gpus": 64.0,
                                                             "global_batch_size": 256}, top=2)
    spelled = command("plan", "--model", "gpt3-175b", "--cluster", "dgx-h100", "--gpus", "64", "--global-batch-size",
                      "256", "--precisions", "bf16,fp8", "--top", "2", "--json")
    assert listed == spelled
    flagged = pipewright.simulate(**SIMULATE, grad_reduce_in_bf16=True)
    assert flagged == command("simulate", "--model", "gpt3-175b", "--cluster", "dgx-a100-80gb", "--tp", "8", "--pp",
                              "16", "--dp", "8", "--vpp", "3", "--schedule", "interleaved", "--global-batch-size",
                              "1536", "--recompute", "full", "--grad-reduce-in-bf16", "--json")


def test_a_transformers_config_object_is_its_config_json(tmp_path):
    config = transformers.LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=16,
                                      num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                                      max_position_embeddings=4096)
    folder = tmp_path / "tiny-llama"
    config.save_pretrained(folder)
    settings = dict(cluster="dgx-h100", pp=4, dp=2, global_batch_size=64)
    from_object = pipewright.simulate(model=config, **settings)
    from_file = pipewright.simulate(model=folder / "config.json", **settings)
    # The object has no _name_or_path: it is named by its model_type; the file by its folder.
    assert from_object.pop("model") == "llama" and from_file.pop("model") == "tiny-llama"
    assert from_object == from_file
    # A dict is taken as the same config.
    assert pipewright.load_model(config.to_dict())["total_parameters"] == \
        pipewright.load_model(folder / "config.json")["total_parameters"]


def test_calls_from_threads_each_get_their_own_answer():
    answers = {}

    def call(gpus):
        answers[gpus] = pipewright.plan(model="gpt3-1.3b", cluster="dgx-h100", gpus=gpus, global_batch_size=64, top=1)

    threads = [threading.Thread(target=call, args=(g,)) for g in (8, 16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers[8]["gpus"] == 8 and answers[16]["gpus"] == 16
    assert answers[8] == pipewright.plan(model="gpt3-1.3b", cluster="dgx-h100", gpus=8, global_batch_size=64, top=1)


def test_versions_agree():
    pyproject = (ROOT / "pyproject.toml").read_text()
    cmake = (ROOT / "CMakeLists.txt").read_text()
    assert pipewright.__version__ == _core.__version__
    assert re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1) == pipewright.__version__
    assert re.search(r"project\(pipewright VERSION (\S+)", cmake).group(1) == pipewright.__version__


def test_python_m_pipewright_is_the_command():
    done = subprocess.run([sys.executable, "-m", "pipewright", "models", "--json"], capture_output=True, text=True)
    assert done.returncode == 0 and json.loads(done.stdout) == command("models", "--json")
    bad = subprocess.run([sys.executable, "-m", "pipewright", "plna"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr == "error: pipewright: unknown command 'plna'; did you mean 'plan'?\n"
    assert bad.stderr == subprocess.run([CLI, "plna"], capture_output=True, text=True).stderr
