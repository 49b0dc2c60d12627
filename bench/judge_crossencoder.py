"""MiniLM fine-tuned as a cross-encoder, against the offline judge, in the judge's folds.

The offline judge reads meaning through a static table distilled from all-MiniLM-L6-v2
and hand-made features. The obvious stronger reader is the encoder itself, fine-tuned
end to end on the reference labels: it sees the turn beside the request and the
answer, token against token, so it could learn a dependence on the answer that no cosine
or word overlap shows. This script measures whether it does, and whether it adds to the
judge when the two are mixed.

- **Inputs.** ``[CLS] turn [SEP] request [SEP] answer [SEP]``, at most ``--max-tokens``
  tokens: the turn's first 72, the request's first 48, and of the answer its first 40
  and as many of its last tokens as fit (a closing question matters). Token types are
  0 for the turn, 1 for the context.
- **Model.** The MiniLM weights the judge fetches (``offline_embed.MINILM``), mean-pooled,
  with one linear output for σ; AdamW at 4e-5, warm-up over the first 10% of steps and
  linear decay, batches of 16, ``--epochs`` passes. People's turns weigh
  ``offline_fit.HUMAN_WEIGHT``, as in the judge's fit.
- **Splits.** ``protocol.folds`` over the 1,314 fit turns, grouped by context: the same
  five folds ``offline_fit.CrossFitJudge`` uses, so the judge's out-of-fold P(genuine)
  and the encoder's out-of-fold score come from models that never saw the turn. Then one
  encoder fit on all 1,314, scored on the 600 held-back people's turns against the
  shipped judge. ``--folds 0,1`` runs only some folds (about 13 minutes each here).
- **Figures.** ROC AUC per style stratum and file for the encoder, the judge, and mixes
  ``a * logit(encoder) + (1 - a) * logit(judge)``; κ and sensitivity of the encoder at
  P 0.5; inference speed in turns per second.

Needs the ``hf`` extra (torch, transformers). Run:
``.venv/bin/python bench/judge_crossencoder.py`` (about 80 minutes on two idle cores).
It is not in ``make bench``'s default list for that reason; ``bench/run.py
judge_crossencoder`` runs it. The last line is one JSON object, keys prefixed
``crossencoder_``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np
from sklearn.metrics import cohen_kappa_score, roc_auc_score

from userturn.assets import fetch
from userturn.judges import load_judge, protocol
from userturn.judges.offline import OfflineJudge
from userturn.judges.offline_embed import MINILM
from userturn.judges.offline_fit import (
    HUMAN_WEIGHT,
    CrossFitJudge,
    Reference,
    load_reference,
    reference_path,
)
from userturn.judges.rules_features import last_user_and_answer
from userturn.spec import Spec
from userturn.types import JudgeInput

MIXES = (0.2, 0.35, 0.5)
BATCH = 16


class CrossEncoder:
    """Tokenising, training and scoring; torch is imported here, not at module load."""

    def __init__(self, max_tokens: int, epochs: int) -> None:
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
        except ImportError as exc:
            raise SystemExit(f"judge_crossencoder needs the hf extra (torch): {exc}") from exc
        self.torch = torch
        self.auto = AutoModel
        self.folder = str(fetch(MINILM))
        self.tok = AutoTokenizer.from_pretrained(self.folder)
        self.max_tokens = max_tokens
        self.epochs = epochs

    def encode(self, row: dict[str, Any]) -> tuple[list[int], list[int]]:
        def piece(text: str) -> list[int]:
            return list(self.tok(text, add_special_tokens=False)["input_ids"])

        question, reply = last_user_and_answer(row["messages"])
        turn = piece(row["user_turn"])[:72]
        request = piece(question)[:48]
        answer = piece(reply)
        room = max(0, self.max_tokens - 4 - len(turn) - len(request))
        if len(answer) > room:
            head = min(40, room // 3)
            answer = answer[:head] + answer[len(answer) - (room - head) :]
        cls, sep = self.tok.cls_token_id, self.tok.sep_token_id
        seq = [cls, *turn, sep, *request, sep, *answer, sep]
        return seq, [0] * (len(turn) + 2) + [1] * (len(seq) - len(turn) - 2)

    def batch(self, items: list[tuple[list[int], list[int]]]) -> tuple[Any, Any, Any]:
        torch = self.torch
        n = max(len(ids) for ids, _ in items)
        ids = torch.zeros(len(items), n, dtype=torch.long)
        types, mask = torch.zeros_like(ids), torch.zeros_like(ids)
        for k, (seq, tt) in enumerate(items):
            ids[k, : len(seq)] = torch.tensor(seq)
            types[k, : len(tt)] = torch.tensor(tt)
            mask[k, : len(seq)] = 1
        return ids, types, mask

    def model(self) -> Any:
        torch = self.torch
        encoder = self.auto.from_pretrained(self.folder)

        class Scorer(torch.nn.Module):  # type: ignore[name-defined,misc]
            def __init__(self) -> None:
                super().__init__()
                self.encoder = encoder
                self.out = torch.nn.Linear(encoder.config.hidden_size, 1)

            def forward(self, ids: Any, types: Any, mask: Any) -> Any:
                h = self.encoder(input_ids=ids, token_type_ids=types, attention_mask=mask)
                m = mask[..., None].float()
                return self.out((h.last_hidden_state * m).sum(1) / m.sum(1))[:, 0]

        return Scorer()

    def fit(self, ref: Reference) -> Any:
        torch = self.torch
        torch.manual_seed(0)
        rng = np.random.default_rng(0)
        x = [self.encode(r) for r in ref.rows]
        y = torch.tensor(ref.genuine.astype(np.float32))
        w = np.where(np.isin(ref.file_of, protocol.HUMAN_FILES), HUMAN_WEIGHT, 1.0)
        weight = torch.tensor(w.astype(np.float32))
        model = self.model()
        opt = torch.optim.AdamW(model.parameters(), lr=4e-5, weight_decay=0.01)
        steps = self.epochs * -(-len(x) // BATCH)
        warm = max(1.0, 0.1 * steps)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (steps - s) / steps)
        )
        model.train()
        for _ in range(self.epochs):
            order = rng.permutation(len(x))
            for b in range(0, len(x), BATCH):
                ix = order[b : b + BATCH]
                logits = model(*self.batch([x[i] for i in ix]))
                loss = torch.nn.functional.binary_cross_entropy_with_logits(
                    logits, y[ix], reduction="none"
                )
                loss = (loss * weight[ix]).sum() / weight[ix].sum()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad()
        return model

    def score(self, model: Any, ref: Reference) -> tuple[np.ndarray, float]:
        """Logits for every row, and turns per second (tokenising included)."""
        model.eval()
        start = time.perf_counter()
        out = []
        with self.torch.no_grad():
            x = [self.encode(r) for r in ref.rows]
            for b in range(0, len(x), 32):
                out.append(model(*self.batch(x[b : b + 32])).numpy())
        return np.concatenate(out), len(x) / (time.perf_counter() - start)


def logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, 1e-4, 1 - 1e-4)
    return np.asarray(np.log(q / (1 - q)))


def compare(truth: np.ndarray, ce: np.ndarray, judge_p: np.ndarray) -> dict[str, Any]:
    """AUC of the encoder, the judge and their mixes; the encoder's κ at P 0.5."""
    if truth.all() or not truth.any():
        return {"n": len(truth)}
    said = ce >= 0
    row: dict[str, Any] = {
        "n": len(truth),
        "auc_encoder": round(float(roc_auc_score(truth, ce)), 3),
        "auc_judge": round(float(roc_auc_score(truth, judge_p)), 3),
        "kappa_encoder": round(float(cohen_kappa_score(truth, said)), 3),
        "sensitivity_encoder": round(float(said[truth].mean()), 3),
    }
    for a in MIXES:
        mix = a * ce + (1 - a) * logit(judge_p)
        row[f"auc_mix_{a}"] = round(float(roc_auc_score(truth, mix)), 3)
    return row


def inputs_of(ref: Reference) -> list[JudgeInput]:
    return [JudgeInput.of_row(r) for r in ref.rows]


def probabilities(verdicts: list[Any]) -> np.ndarray:
    return np.array([v.probability if v.probability is not None else np.nan for v in verdicts])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folds", default="0,1,2,3,4", help="which of the 5 folds to run")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--no-heldout", action="store_true", help="skip the held-back fit")
    args = ap.parse_args(argv)
    try:
        chosen = {int(k) for k in args.folds.split(",") if k.strip()}
    except ValueError:
        ap.error(f"--folds: {args.folds!r} is not a comma-separated list of fold numbers")
    if not chosen or not chosen <= set(range(protocol.FOLDS)):
        ap.error(f"--folds: {args.folds!r} names no folds in 0-{protocol.FOLDS - 1}")
    ce = CrossEncoder(args.max_tokens, args.epochs)
    ref = load_reference([reference_path(n) for n in protocol.REFERENCE_FILES])
    fit_rows = np.where(np.isin(ref.file_of, protocol.FIT_FILES))[0]
    fit, held = ref.take(fit_rows), ref.take(np.where(~np.isin(ref.file_of, protocol.FIT_FILES))[0])
    spec = Spec(kind="offline", target="", raw="offline")
    judge_p = probabilities(CrossFitJudge(fit, OfflineJudge(spec)).judge(inputs_of(fit)))
    scores, scored, speed = np.full(len(fit.rows), np.nan), np.zeros(len(fit.rows), bool), []
    for k, (train, test) in enumerate(protocol.folds(fit.rows, fit.genuine, protocol.FOLDS)):
        if k not in chosen:
            continue
        model = ce.fit(fit.take(train))
        scores[test], rate = ce.score(model, fit.take(test))
        scored[test] = True
        speed.append(rate)
        print(f"fold {k} done {time.strftime('%H:%M:%S')}", file=sys.stderr, flush=True)
    out: dict[str, Any] = {"folds": sorted(chosen), "epochs": args.epochs}
    styles, files = protocol.styles(fit.rows), fit.file_of
    strata = {"all": scored} | {s: scored & (styles == s) for s in protocol.STYLES}
    strata |= {f.removesuffix(".jsonl"): scored & (files == f) for f in protocol.SMALL_MODEL_FILES}
    out["oof"] = {k: compare(fit.genuine[m], scores[m], judge_p[m]) for k, m in strata.items()}
    if not args.no_heldout:
        model = ce.fit(fit)
        held_scores, rate = ce.score(model, held)
        speed.append(rate)
        shipped = probabilities(load_judge("offline").judge(inputs_of(held)))
        out["heldout_people"] = compare(held.genuine, held_scores, shipped)
    out["turns_per_s"] = round(float(np.median(speed)), 1) if speed else None
    print(json.dumps(out, indent=1), file=sys.stderr)
    print(json.dumps({f"crossencoder_{k}": v for k, v in out.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
