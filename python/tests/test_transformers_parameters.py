"""transformers as the oracle of pipewright's model reader: for every model_type pipewright reads, the
configuration transformers makes (its defaults: each type's reference shape) is read by both, and the model
transformers instantiates on the meta device has exactly the total and active parameter counts pipewright
computes. Run as a script, prints the table of docs/python.md."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import transformers

import pipewright

ROOT = Path(__file__).resolve().parents[2]

# Every model_type core/hf_config.cpp reads. A composite (multimodal) type is checked through its
# language model, the part pipewright plans: text_config's type.
MODEL_TYPES = [
    "gpt2", "gpt_neox", "llama", "mistral", "qwen2", "qwen3", "phi3", "nemotron", "gemma2", "gemma3_text",
    "mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt_oss", "llama4_text",
]
COMPOSITE_TYPES = {"gemma3": "gemma3_text", "llama4": "llama4_text"}


# Defaults transformers leaves unset though its models need them, completed as its documentation says
# (NemotronConfig: num_key_value_heads defaults to num_attention_heads) or as the published model has them
# (DeepSeek-V2's config.json: 6 experts a token).
COMPLETED = {"nemotron": lambda c: {"num_key_value_heads": c.num_attention_heads},
             "deepseek_v2": lambda c: {"num_experts_per_tok": 6}}


def reference_config(model_type: str):
    config = transformers.AutoConfig.for_model(model_type)
    for key, value in COMPLETED.get(model_type, lambda c: {})(config).items():
        setattr(config, key, value)
    if model_type in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
        # Sliding windows on some layers only (max_window_layers) are not modelled; the defaults have none.
        assert not config.use_sliding_window
    return config


def counted(model: torch.nn.Module) -> tuple[int, int]:
    """Total parameters (shared ones once, as model.parameters() yields them) and the parameters one token
    uses: routed experts count top_k of their experts. transformers keeps each MoE layer's routed experts
    under a module named `experts` (as separate modules or fused 3-D weights), its shared experts under
    other names."""
    total = sum(p.numel() for p in model.parameters())
    inactive = 0
    for name, module in model.named_modules():
        if not name.endswith(".experts"):
            continue
        experts = _expert_count(module)
        top_k = _top_k(model.config)
        inactive += sum(p.numel() for p in module.parameters()) * (experts - top_k) // experts
    return total, total - inactive


def _text_config(config):
    return getattr(config, "text_config", None) or config


def _top_k(config) -> int:
    c = _text_config(config)
    for key in ("num_experts_per_tok", "moe_topk", "experts_per_token"):
        if getattr(c, key, None):
            return int(getattr(c, key))
    raise AssertionError(f"{c.model_type}: no top-k field")


def _expert_count(experts: torch.nn.Module) -> int:
    if isinstance(experts, torch.nn.ModuleList):
        return len(experts)
    for key in ("num_experts", "num_local_experts"):
        if getattr(experts, key, None):
            return int(getattr(experts, key))
    # Fused weights: the first dimension is the expert.
    return next(experts.parameters()).shape[0]


def meta_model(config) -> torch.nn.Module:
    with torch.device("meta"):
        return transformers.AutoModelForCausalLM.from_config(config)


def row(model_type: str) -> dict:
    config = reference_config(model_type)
    total, active = counted(meta_model(config))
    shown = pipewright.load_model(config)
    return {"model_type": model_type, "transformers_total": total, "transformers_active": active,
            "pipewright_total": shown["total_parameters"], "pipewright_active": shown["active_parameters"]}


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_parameter_counts_equal_transformers(model_type):
    r = row(model_type)
    assert (r["pipewright_total"], r["pipewright_active"]) == (r["transformers_total"], r["transformers_active"])


@pytest.mark.parametrize("composite,text_type", sorted(COMPOSITE_TYPES.items()))
def test_composite_configs_are_read_through_their_language_model(composite, text_type):
    # The composite config (a text_config inside) names the same language model as its text_config alone.
    config = transformers.AutoConfig.for_model(composite)
    assert config.text_config.model_type == text_type
    whole = pipewright.load_model(config)
    text = pipewright.load_model(config.text_config)
    assert whole["total_parameters"] == text["total_parameters"] > 0
    assert whole["active_parameters"] == text["active_parameters"]


def test_every_supported_type_is_checked():
    # pipewright's own list of what it reads, from its error message, against this file's.
    with pytest.raises(pipewright.PipewrightError) as error:
        pipewright.load_model({"model_type": "falcon", "hidden_size": 64})
    listed = str(error.value).split("use a config.json of ")[1].split(", or a pipewright model JSON")[0]
    names = {n.strip() for n in listed.replace(" or ", ", ").split(",")}
    checked = set(MODEL_TYPES) | set(COMPOSITE_TYPES)
    assert names | {"gemma3_text", "llama4_text"} == checked


SHIPPED_CONFIGS = sorted((ROOT / "examples").glob("*.config.json"))


@pytest.mark.parametrize("path", SHIPPED_CONFIGS, ids=lambda p: p.name)
def test_shipped_configs_read_alike(path, tmp_path):
    # Each Hugging Face config.json in examples/ is read by AutoConfig as from a downloaded snapshot, and
    # the model it makes has pipewright's counts.
    (tmp_path / "config.json").write_text(path.read_text())
    config = transformers.AutoConfig.from_pretrained(tmp_path)
    total, active = counted(meta_model(config))
    shown = pipewright.load_model(path)
    assert (shown["total_parameters"], shown["active_parameters"]) == (total, active)


def table() -> str:
    lines = [f"transformers {transformers.__version__}, torch {torch.__version__}, each type's default configuration",
             "", "| model_type | total (transformers) | total (pipewright) | active (transformers) | active (pipewright) |",
             "|---|---:|---:|---:|---:|"]
    for t in MODEL_TYPES:
        r = row(t)
        lines.append(f"| {t} | {r['transformers_total']:,} | {r['pipewright_total']:,} | "
                     f"{r['transformers_active']:,} | {r['pipewright_active']:,} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(table() + "\n")
