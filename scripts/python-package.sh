#!/usr/bin/env bash
# The Python package as a user installs it: `pip install .` into a fresh virtual environment (scikit-build-core
# builds the C++ core; the CUDA parts are left out here, the C++ build compiles and tests them), then the
# README's Python example, whose first plan must be the installed command's first plan for the same settings;
# then the sdist as PyPI's standard front end (build) makes it, which must hold every file git tracks that
# the build reads.
# Environment: PIPEWRIGHT_PACKAGE_VENV, a folder for the environment (default: a new temporary one, removed).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
start=$SECONDS
if [ -n "${PIPEWRIGHT_PACKAGE_VENV:-}" ]; then
  venv=$PIPEWRIGHT_PACKAGE_VENV
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  venv=$tmp/venv
fi
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check . -C cmake.define.PIPEWRIGHT_CUDA=OFF
echo "python-package: pip install . in $((SECONDS - start)) s" >&2
cd "$venv"  # away from the source tree: the installed package, not python/, is imported
"$venv/bin/python" -c "import pipewright; print(pipewright.plan(model='gpt3-175b', cluster='dgx-a100-80gb', gpus=1024, global_batch_size=1536)['plans'][0])" > module.txt
"$venv/bin/pipewright" plan --model gpt3-175b --cluster dgx-a100-80gb --gpus 1024 --global-batch-size 1536 --json > command.json
"$venv/bin/python" - <<'PY'
import ast, json
module = ast.literal_eval(open("module.txt").read())
command = json.load(open("command.json"))["plans"][0]
import pipewright
assert pipewright.__file__.startswith(__import__("sys").prefix), pipewright.__file__
if module != command:
    raise SystemExit(f"python-package: the module's first plan differs from the command's:\n{module}\n{command}")
print(f"python-package: pipewright {pipewright.__version__} from {pipewright.__file__}; "
      f"plan 1: tp {module['tp']}, pp {module['pp']}, dp {module['dp']}, {module['step_time_s']:.3f} s a step, "
      f"the command's plan 1 too")
PY

# The sdist: every tracked file under the folders CMake builds from, and the build's own files.
"$venv/bin/python" -m pip install -q --disable-pip-version-check build==1.6.1
cd "$root"
"$venv/bin/python" -m build --sdist --outdir "$venv/dist" . > /dev/null
sdist=$(ls "$venv"/dist/pipewright-*.tar.gz)
tar -tzf "$sdist" | sed 's|^[^/]*/||' | sort > "$venv/sdist.txt"
git ls-files core kernels schedules sim serving planner exports executor profiler calibrate cli cmake python \
  CMakeLists.txt pyproject.toml README.md | grep -v '^python/tests/' | sort > "$venv/tracked.txt"
missing=$(comm -23 "$venv/tracked.txt" "$venv/sdist.txt")
if [ -n "$missing" ]; then
  echo "python-package: $(basename "$sdist") lacks files the build reads:" >&2
  echo "$missing" >&2
  exit 1
fi
echo "python-package: $(basename "$sdist") holds the $(wc -l < "$venv/tracked.txt") files the build reads" >&2
