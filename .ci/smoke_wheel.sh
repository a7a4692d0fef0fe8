#!/usr/bin/env bash
# Installs the wheel found in DIST (default: dist/) with one backend extra into a brand-new
# virtual environment and runs .ci/wheel_smoke.py from an empty folder outside the checkout, so
# the installed package, not the source tree, is what gets imported.
# Usage: bash .ci/smoke_wheel.sh [DIST] [tensorflow|jax|torch]
# With jax or torch the venv has no TensorFlow at all, and the smoke test checks that.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dist=$(cd "${1:-$repo/dist}" && pwd)
backend=${2:-tensorflow}
wheel=$(ls "$dist"/keras_normkit-*.whl | head -n 1)
work=$(mktemp -d "${TMPDIR:-/tmp}/keras_normkit_wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
"${PYTHON:-python3}" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
# CI's constraints: the CPU build of torch we test with (the extra states only a minimum).
"$work/venv/bin/python" -m pip install --quiet -c "$repo/.ci/constraints.txt" "$wheel[$backend]"
cp "$repo/.ci/wheel_smoke.py" "$work/wheel_smoke.py"
cd "$work"
flag=$([ "$backend" = tensorflow ] || echo --without-tensorflow)
env -u PYTHONPATH KERAS_BACKEND="$backend" TF_CPP_MIN_LOG_LEVEL=3 "$work/venv/bin/python" wheel_smoke.py $flag
