#!/usr/bin/env bash
# The checks that need a GPU, as one command (time on an accelerator is short):
#   1. the PyTorch-native recurrent loops on CUDA against the CPU, outputs and gradients
#      (tests/backend/test_torch_rnn.py::test_loop_on_cuda_equals_cpu, float64, every option),
#   2. the rest of that file and the recurrent layers' own tests on the GPU (PyTorch);
#   3. benchmarks/accelerator.py on JAX and PyTorch (about 6 minutes).
# Usage, from the tree's root, with Keras importable (benchmarks/README.md#accelerator says how
# to carry it to a machine without network):
#   bash benchmarks/gpu_check.sh OUTDIR
# Everything goes to OUTDIR: a log per step and accelerator.json. A failed step fails the
# command (exit 1) without stopping the steps after it; without a CUDA device it exits 2.
set -uo pipefail
out=${1:?usage: bash benchmarks/gpu_check.sh OUTDIR}
cd "$(dirname "$0")/.."
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'" || exit 2
status=0
run() {
  local name=$1
  shift
  echo "=== $name"
  "$@" 2>&1 | tee "$out/$name.log" || status=1
}
# On the PyTorch backend Keras puts the layers' tensors on the GPU: the native loops' file
# (its layers against Keras's loop, the launch counts, mixed precision, the compiled step)
# and the recurrent layers' own tests run there, in four processes. (JAX runs none of the
# native loops; its GPU check of 2026-12-04 stands.)
pytest_args=(-q -p no:cacheprovider -m "not slow" -n 4)
run torch_loops env KERAS_BACKEND=torch python3 -m pytest "${pytest_args[@]}" \
  tests/backend/test_torch_rnn.py
run torch_layers env KERAS_BACKEND=torch python3 -m pytest "${pytest_args[@]}" \
  tests/layers/test_layer_norm_lstm.py tests/layers/test_layer_norm_gru.py \
  tests/layers/test_layer_norm_simple_rnn.py tests/layers/test_layer_norm_rnn.py \
  tests/layers/test_fast_weights.py tests/layers/test_rnn_mask_propagation.py
run accelerator python3 benchmarks/accelerator.py --backends jax,torch --max-minutes 5 \
  --json "$out/accelerator.json"
exit "$status"
