#!/usr/bin/env bash
# The long run, one benchmark after the other, on one CPU thread at low priority: HTRU2 (10
# folds x 7 methods), then the UCI sets with >= 1000 examples, then the others, then Tox21.
# Each script merges its rows into notebooks/data/snn_*.json as they are done and skips the
# rows already there, so the run can be stopped and started again.
#
#   NORMKIT_UCI121_DATA=... NORMKIT_HTRU2_DATA=... NORMKIT_TOX21_DATA=... \
#     bash examples/snn_benchmarks/run_all.sh > snn_run.log 2>&1 &
set -u
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python}
export KERAS_BACKEND=${KERAS_BACKEND:-jax} PYTHONHASHSEED=0 TF_CPP_MIN_LOG_LEVEL=3
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1
export XLA_FLAGS=--xla_cpu_multi_thread_eigen=false
run() { echo "=== $(date -u) $*"; nice -n 10 "$PYTHON" "$@"; }
run examples/snn_benchmarks/htru2.py --data "$NORMKIT_HTRU2_DATA"
run examples/snn_benchmarks/uci.py --data "$NORMKIT_UCI121_DATA" --sets large
if [ -f examples/snn_benchmarks/tox21.py ]; then
  run examples/snn_benchmarks/tox21.py --data "$NORMKIT_TOX21_DATA"
fi
run examples/snn_benchmarks/uci.py --data "$NORMKIT_UCI121_DATA" --sets small
echo "=== $(date -u) done"
