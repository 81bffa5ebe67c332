"""The command line in-process: keyword arguments become the command's options, its JSON becomes Python
objects, and its one-line errors become PipewrightError. One translation for every command, so that the
Python functions take exactly the CLI's settings and answer with exactly its JSON."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from typing import Any, Iterable, Mapping

# The command keeps state of its own while it runs (its option parser, the search's workers): one call at
# a time; each releases the interpreter, so other threads go on meanwhile.
_lock = threading.Lock()


class PipewrightError(Exception):
    """The command's one-line error. kind is "input" (bad settings, the CLI's exit 2) or "runtime" (exit 1);
    str() is the message the CLI prints after "error: "; details holds the lines it printed after it."""

    def __init__(self, message: str, kind: str, exit_code: int, details: str = ""):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.exit_code = exit_code
        self.details = details

    def __reduce__(self):
        # Whole across processes (a spawned rank's error reaches its parent with its kind).
        return type(self), (self.message, self.kind, self.exit_code, self.details)


def run(args: Iterable[str]) -> str:
    """Runs `pipewright ARGS...` in this process and returns what it printed; raises PipewrightError."""
    # Imported here, so that pipewright.kernels runs where the compiled module is not built (the source tree).
    from pipewright import _core

    args = [str(a) for a in args]
    with _lock:
        code, out, err = _core.run(args)
    if code != 0:
        lines = err.rstrip("\n").split("\n")
        # The error line is the first that starts with "error:"; warnings may come before it.
        at = next((i for i, line in enumerate(lines) if line.startswith("error: ")), None)
        if at is None:
            raise PipewrightError(err.strip() or f"pipewright exited with {code}", _kind(code), code)
        if at > 0:
            sys.stderr.write("\n".join(lines[:at]) + "\n")
        raise PipewrightError(lines[at][len("error: "):], _kind(code), code, "\n".join(lines[at + 1:]))
    if err:
        sys.stderr.write(err)
    return out


def _kind(code: int) -> str:
    return "input" if code == 2 else "runtime"


def option_name(keyword: str) -> str:
    """global_batch_size -> --global-batch-size."""
    return "--" + keyword.replace("_", "-")


def _is_config_object(value: Any) -> bool:
    # A transformers PretrainedConfig (to_dict), or a mapping given in place of a file.
    return isinstance(value, Mapping) or (callable(getattr(value, "to_dict", None)) and hasattr(value, "model_type"))


def _value_text(value: Any) -> str:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(value)


class _Arguments:
    """The option list of one command, and the files written for config objects given in place of paths
    (removed when the command is done)."""

    def __init__(self, command: list[str]):
        self.args = list(command)
        self._folder: tempfile.TemporaryDirectory | None = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._folder is not None:
            self._folder.cleanup()

    def _write(self, keyword: str, value: Any) -> str:
        data = dict(value) if isinstance(value, Mapping) else value.to_dict()
        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix="pipewright-")
        # A Hugging Face config.json names the model by its folder when it has no _name_or_path.
        name = data.get("_name_or_path") or data.get("name") or data.get("model_type") or keyword
        folder = os.path.join(self._folder.name, keyword, os.path.basename(str(name)) or keyword)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "config.json")
        with open(path, "w") as f:
            json.dump(data, f, default=str)
        return path

    def add(self, settings: Mapping[str, Any]) -> "_Arguments":
        for keyword, value in settings.items():
            if value is None:
                continue
            option = option_name(keyword)
            if value is True:
                self.args.append(option)
            elif value is False:
                self.args.append(option + "=false")
            elif _is_config_object(value):
                self.args += [option, self._write(keyword, value)]
            elif isinstance(value, (list, tuple, set, frozenset)):
                items = sorted(value) if isinstance(value, (set, frozenset)) else value
                self.args += [option, ",".join(_value_text(v) for v in items)]
            else:
                self.args += [option, _value_text(value)]
        return self


def command_json(command: list[str], settings: Mapping[str, Any], json_flag: str = "--json") -> Any:
    """Runs one command with settings as its options and json_flag; returns its JSON as Python objects."""
    with _Arguments(command).add(settings) as arguments:
        if json_flag:
            arguments.args.append(json_flag)
        return json.loads(run(arguments.args))
