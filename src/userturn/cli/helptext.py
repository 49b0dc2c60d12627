"""What ``--help`` says beyond each command's own docstring: an example per command,
and the words for flags that several commands share (``--seed``, ``--eval-limit``), so
they are written once. :func:`userturn.cli.helpfmt.tidy` applies both; a test checks
that every command has an example and every option a description."""

from __future__ import annotations

EXAMPLES: dict[str, tuple[str, ...]] = {
    "": (
        "userturn run --limit 5 --temperatures 0 --dry-run",
        "userturn run --model 'smollm2-135m?n_threads=2' --limit 20 --out runs/demo",
        "userturn report --run runs/demo",
    ),
    "run": (
        "userturn run --limit 5 --dry-run",
        "userturn run --model smollm2-135m --dataset gsm8k --limit 20 --out runs/demo",
        "userturn run --model 'llamacpp:m.gguf?n_ctx=4096' --perturb truncate:0.5",
    ),
    "list": ("userturn list", "userturn list --format json"),
    "likelihood": ("userturn likelihood --model smollm2-135m --dataset healthbench --limit 20",),
    "rollout": (
        "userturn rollout --model smollm2-135m --dataset gsm8k --limit 5 --turns 3",
        "userturn rollout --limit 5 --turns 4 --stop-on degenerate --best-of 2",
    ),
    "render": ("userturn render --model smollm2-135m --messages conversation.json",),
    "agree": (
        "userturn agree mine.jsonl theirs.jsonl",
        "userturn agree --run runs/demo --judges offline,rules",
    ),
    "report": ("userturn report --run runs/demo",),
    "compare": ("userturn compare runs/base runs/trained",),
    "rescore": ("userturn rescore --run runs/demo",),
    "recover": ("userturn recover --run runs/demo",),
    "judge": (
        "userturn judge --run runs/demo --judge rules",
        "userturn judge --in turns.jsonl --out labels.jsonl --judge offline",
    ),
    "judge card": (
        "userturn judge card --judge offline",
        "userturn judge card --judge openai:gpt-5.4-mini --ref builtin --out cards/",
        "userturn judge card --judge 'llm:openai:local?max_tokens=200' --ref 'builtin?limit=50'",
    ),
    "data": ("userturn data list",),
    "data pull": ("userturn data pull",),
    "data list": ("userturn data list --format md",),
    "export": ("userturn export labels --run runs/demo --judge offline --out labels.jsonl",),
    "export labels": ("userturn export labels --run runs/demo --judge offline --out labels.jsonl",),
    "export inspect": ("userturn export inspect --run runs/demo --out logs/",),
    "export pairs": ("userturn export pairs --run runs/demo --out pairs.jsonl",),
    "export conversations": (
        "userturn export conversations --run runs/demo --out chats.jsonl --only-genuine",
    ),
    "annotate": ("userturn annotate export --run runs/demo --out packet --n 50",),
    "annotate export": ("userturn annotate export --run runs/demo --out packet --n 50",),
    "annotate serve": ("userturn annotate serve packet --port 8765",),
    "annotate import": ("userturn annotate import packet --out labels",),
    "train": ("userturn train dpo --model smollm2-135m --from-run runs/demo --out trained/dpo",),
    "train sft": (
        "userturn train sft --model smollm2-135m --data sharegpt --loss-on user --out trained/sft",
    ),
    "train dpo": (
        "userturn train dpo --model smollm2-135m --from-run runs/demo --out trained/dpo --eval",
    ),
    "train eval": ("userturn train eval --trained trained/dpo",),
}
"""Example lines per command path ("" is the top level)."""

FLAG_HELP: dict[str, str] = {
    "--seed": "Random seed.",
    "--bos-token": "BOS token the template renders (default: the model's).",
    "--eos-token": "EOS token the template renders (default: the model's).",
    "--judge-base-url": "OpenAI-compatible server of an llm:/openai: judge "
    "(default: $OPENAI_BASE_URL).",
    "--max-per-context": "Most pairs taken from one context.",
    "--max-pairs-per-context": "Most pairs taken from one context.",
    "--port": "Port to listen on.",
    "--max-steps": "Optimizer steps.",
    "--max-examples": "Training examples used at most.",
    "--max-length": "Tokens per example.",
    "--batch-size": "Examples per step.",
    "--grad-accum": "Steps of gradient accumulation.",
    "--learning-rate": "Learning rate.",
    "--beta": "DPO beta: how far the policy may move from the reference.",
    "--lora": "LoRA adapter or full model.",
    "--eval-dataset": "Evaluation: dataset spec (default: the probe run's).",
    "--eval-limit": "Evaluation: first N items (default: the probe run's).",
    "--eval-temperatures": "Evaluation: temperatures T1,T2 (default: the probe run's).",
    "--eval-samples": "Evaluation: samples per context at T>0 (default: the probe run's).",
    "--eval-judge": "Evaluation: judge spec (default: the probe run's).",
}
"""Help for options that were declared without any, by flag."""
