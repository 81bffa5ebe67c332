"""pipewright: plan, simulate and run pipeline-parallel training and serving of large transformers.

Each function takes the command line's settings as keyword arguments (`global_batch_size=1536` for
`--global-batch-size 1536`; True for a flag, False for its negation, a list for a comma-separated value)
and returns what the command prints with --json, as Python objects. A model or cluster may be given as a
preset name, a path, a dict or a transformers configuration object. Bad settings raise PipewrightError
with the command's one-line message; `pipewright COMMAND --help` lists every setting.

    >>> import pipewright
    >>> best = pipewright.plan(model="gpt3-175b", cluster="dgx-a100-80gb", gpus=1024,
    ...                        global_batch_size=1536)["plans"][0]
"""

from __future__ import annotations

# Folders named pipewright on sys.path make one package: in a build tree, the compiled module _core sits in
# <build>/python/pipewright/ beside this folder's sources.
from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

from typing import Any

from pipewright._cli import PipewrightError, command_json, run  # noqa: E402

# The project's version (CMakeLists.txt, pyproject.toml); the compiled module says the same (tested).
__version__ = "0.1.0"

__all__ = [
    "PipewrightError",
    "__version__",
    "clusters",
    "load_cluster",
    "load_model",
    "models",
    "plan",
    "run",
    "serve_plan",
    "serve_simulate",
    "simulate",
]


def simulate(**settings: Any) -> dict:
    """`pipewright simulate --json`: one training iteration of one configuration."""
    return command_json(["simulate"], settings)


def plan(**settings: Any) -> dict:
    """`pipewright plan --json`: the fastest configurations that fit ("plans", fastest first)."""
    return command_json(["plan"], settings)


def serve_simulate(**settings: Any) -> dict:
    """`pipewright serve simulate --json`: serving a workload with one configuration."""
    return command_json(["serve", "simulate"], settings)


def serve_plan(**settings: Any) -> dict:
    """`pipewright serve plan --json`: the serving configurations that meet the workload's targets."""
    return command_json(["serve", "plan"], settings)


def models() -> list:
    """The built-in model presets (`pipewright models --json`)."""
    return command_json(["models"], {})["models"]


def clusters() -> list:
    """The built-in cluster presets (`pipewright clusters --json`)."""
    return command_json(["clusters"], {})["clusters"]


def load_model(model: Any) -> dict:
    """A model (preset name, path, dict or transformers configuration) as pipewright reads it, in its model
    JSON form with total_parameters and active_parameters (`pipewright models --show`)."""
    return command_json(["models"], {"show": model}, json_flag="")


def load_cluster(cluster: Any) -> dict:
    """A cluster (preset name, path or dict) in pipewright's cluster JSON form (`pipewright clusters --show`)."""
    return command_json(["clusters"], {"show": cluster}, json_flag="")
