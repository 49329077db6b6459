#!/usr/bin/env bash
# One GPU session, nothing built or installed: the CUDA save tests, then every configuration of
# benchmarks/gpu_hook.py in one go. Run from the repository root:
#
#     bash benchmarks/gpu_session.sh [extra benchmarks/gpu_hook.py arguments]
#
# Uses $PYTHON (default python3), which must have torch with CUDA and numpy; the hook also needs
# tensorboard's protobufs: if that python lacks tensorboard or protobuf, make them on the host
# first (pure Python / abi3 wheels, ~10 MB) and carry the folder to the GPU machine:
#     pip install --no-deps --target .gpu-deps tensorboard 'protobuf>=4.21'
# Results (JSON and the markdown table) go to $OUT when set (the device tool's folder), else
# benchmarks/results/.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if [ -d .gpu-deps ]; then export PYTHONPATH="$PYTHONPATH:$PWD/.gpu-deps"; fi
RESULTS=${OUT:-benchmarks/results}
mkdir -p "$RESULTS"
echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi: not found"
"$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' || exit 2
missing=$("$PY" -c '
import importlib
for name in ("numpy", "google.protobuf", "tensorboard.compat.proto.tensor_pb2"):
    try:
        importlib.import_module(name)
    except Exception as e:
        print(name, "(%s)" % type(e).__name__)
')
if [ -n "$missing" ]; then
    echo "missing for the hook: $missing; see the top of benchmarks/gpu_session.sh (.gpu-deps)"; exit 2
fi
echo "== CUDA save tests (tests/hook/test_cuda_saves.py)"
"$PY" tests/hook/test_cuda_saves.py 2>&1 | tee "$RESULTS/cuda-tests.txt"
tests_rc=${PIPESTATUS[0]}
echo "== benchmark"
"$PY" benchmarks/gpu_hook.py --device cuda --results-dir "$RESULTS" "$@" 2>&1 | tee "$RESULTS/gpu-hook.txt"
bench_rc=${PIPESTATUS[0]}
echo "== tests exit $tests_rc, benchmark exit $bench_rc"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
