#!/usr/bin/env bash
# CPU demonstration of post-training for interaction awareness, on the embedded
# SmolLM2-135M-Instruct (loaded through transformers from its GGUF, exported once).
#
#   1. a self-play probe run (llama.cpp, T=1.0, k=6) on GSM8K items 1-12 -> DPO pairs;
#   2. SFT with the loss on the *user* turns of real ShareGPT conversations (LoRA);
#   3. DPO on the self-play pairs (LoRA);
#   4. before/after on 16 *held-out* GSM8K items (13-28, never used for pairs):
#      the same grid (T=0 and T=1.0 with k=4, offline judge) on hf:smollm2-135m and on
#      each adapter; both comparisons share one base run.
#
# Everything lands under $OUT (default runs/train-local, ignored by git). Re-running
# resumes: the probe and evaluation runs make no model call for what their stores hold,
# and a finished training is kept. Time: about 15 min on an idle 2-core machine, 27 min on
# a shared one (SFT 242 s, DPO 452-510 s there); the README's post-training table is its output.
#
# Usage: examples/train-local.sh            (from the repository root, after `make setup-test`)
#        OUT=/tmp/demo SFT_STEPS=10 DPO_STEPS=10 examples/train-local.sh
set -euo pipefail

PY=${PY:-.venv/bin/python}
UT="$PY -m userturn"
OUT=${OUT:-runs/train-local}
SFT_STEPS=${SFT_STEPS:-30}
DPO_STEPS=${DPO_STEPS:-20}
N_PAIR_ITEMS=${N_PAIR_ITEMS:-12}
N_HELDOUT=${N_HELDOUT:-16}
mkdir -p "$OUT"

# -- 1. self-play probe run: the pairs' source ---------------------------------------
cat > "$OUT/probe.yaml" <<EOF
models: [smollm2-135m]
datasets: [gsm8k]
limit: $N_PAIR_ITEMS
temperatures: [1.0]
samples: 6
judges: [offline]
max_answer_tokens: 192
max_user_tokens: 48
EOF
$UT run --config "$OUT/probe.yaml" --out "$OUT/probe"
$UT export pairs --run "$OUT/probe" --out "$OUT/pairs.jsonl"

# -- held-out evaluation items: the GSM8K items after the pair items ------------------
$PY - "$OUT/heldout.jsonl" "$N_PAIR_ITEMS" "$N_HELDOUT" <<'EOF'
import json, sys
from userturn.datasets import load_dataset

path, skip, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
items = load_dataset("gsm8k").load()[skip:skip + n]
with open(path, "w", encoding="utf-8") as f:
    for it in items:  # gsm8k's published format; ids kept so overlap checks work
        f.write(json.dumps({"id": it.id.removeprefix("gsm8k-"),
                            "question": it.messages[0]["content"],
                            "answer": it.reference["answer"]}) + "\n")
print(f"held-out: {len(items)} items, {items[0].id} .. {items[-1].id}")
EOF
cat > "$OUT/eval.yaml" <<EOF
datasets: [gsm8k:$OUT/heldout.jsonl]
temperatures: [0.0, 1.0]
samples: 4
judges: [offline]
max_answer_tokens: 192
max_user_tokens: 48
EOF

# -- 2. SFT, loss on user turns (real ShareGPT follow-ups) ----------------------------
# `train sft ... --eval --eval-config ...` trains and evaluates in one command; here the
# two steps are split so that a killed demo resumes: a finished training (train.json) is
# kept, and the evaluation runs resume from their stores. Delete a folder to retrain.
EVAL=(--eval-config "$OUT/eval.yaml" --eval-before "$OUT/eval-base" --eval-options batch=32)
[ -f "$OUT/sft-user/train.json" ] || \
  $UT train sft --model smollm2-135m --data sharegpt --loss-on user --lora \
    --max-steps "$SFT_STEPS" --max-examples 128 --max-length 256 --batch-size 2 \
    --learning-rate 2e-4 --out "$OUT/sft-user"
$UT train eval --trained "$OUT/sft-user" "${EVAL[@]}"

# -- 3. DPO on the self-play pairs ---------------------------------------------------
[ -f "$OUT/dpo-selfplay/train.json" ] || \
  $UT train dpo --model smollm2-135m --from-run "$OUT/probe" --judge offline --lora \
    --max-steps "$DPO_STEPS" --max-length 384 --batch-size 2 --learning-rate 1e-4 \
    --out "$OUT/dpo-selfplay"
$UT train eval --trained "$OUT/dpo-selfplay" "${EVAL[@]}"

echo
echo "tables: $OUT/sft-user/eval/comparison.md  $OUT/dpo-selfplay/eval/comparison.md"
