#!/usr/bin/env bash
# Installs the wheel found in DIST (default: dist/) into a brand-new virtual environment and runs
# .ci/wheel_smoke.py from an empty folder outside the checkout, so the installed package, not the
# source tree, is what gets imported. Usage: bash .ci/smoke_wheel.sh [DIST]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dist=$(cd "${1:-$repo/dist}" && pwd)
wheel=$(ls "$dist"/keras_normkit-*.whl | head -n 1)
work=$(mktemp -d "${TMPDIR:-/tmp}/keras_normkit_wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
"${PYTHON:-python3}" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
"$work/venv/bin/python" -m pip install --quiet "$wheel"
cp "$repo/.ci/wheel_smoke.py" "$work/wheel_smoke.py"
cd "$work"
env -u PYTHONPATH KERAS_BACKEND="${KERAS_BACKEND:-tensorflow}" "$work/venv/bin/python" wheel_smoke.py
