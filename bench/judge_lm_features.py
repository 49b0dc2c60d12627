"""SmolLM2's own likelihood of each reference turn, under four conditions (cached).

The offline judge sees words, cues and a distilled embedding. What it cannot see is how
much a turn *depends on this answer*, which is what the rubric asks. A language model
can say so directly: a follow-up becomes likelier when the answer it refers to is
present, a new task or a re-ask does not. The embedded SmolLM2 scores each reference
turn ``u`` (mean nats per token, the end marker not scored) after:

- ``user``: the real request and answer, under the template's user header;
- ``asst``: the same context under the assistant header (who speaks);
- ``cf``: the real request with another context's answer (from the same file, another
  conversation, chosen by a hash of the row id), under the user header;
- ``alone``: no conversation at all, as the first user message.

Contexts are the last request and answer only, each cut to its first and last
``KEEP_CHARS // 2`` characters, and a turn is scored on its first ``TURN_TOKENS`` tokens,
so that every row costs about the same. Each condition's prompt is evaluated on top of
the prefix it shares with the one before (the user and assistant prompts share the whole
exchange, the counterfactual shares the request), without logits; only the turn's
positions get them. The embedded llama.cpp build evaluates about 300 prompt tokens/s
here, which is what makes this a bench and not a judge input. Rows are cached by id and
turn hash in ``~/.cache/userturn/bench/lm_features.jsonl``, so an interrupted run
resumes. The scores are deterministic: the conditions always come in the same order,
each on the prefix the one before left (llama.cpp's kernels depend on batch shape, see
``llamacpp_score``).

Run: ``.venv/bin/python bench/judge_lm_features.py [LIMIT]`` (about 2 s per row on two
idle cores, 1,914 rows, so about 65 minutes); ``bench/judge_lm_likelihood.py`` runs it
first and reads the cache.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from userturn.backends.base import TemplateOptions
from userturn.backends.likelihood import continuation_ids
from userturn.backends.llamacpp import LlamaCppBackend
from userturn.backends.llamacpp_batch import eval_prompt, logits_row
from userturn.backends.llamacpp_score import _score_one
from userturn.chat import derive_markers, user_turn_prompt
from userturn.chat.markers import SENTINEL
from userturn.judges.offline_fit import default_references, heldout_reference, read_rows
from userturn.run.likelihood_plan import assistant_turn_prompt, with_answer
from userturn.spec import Spec
from userturn.types import Message

KEEP_CHARS = 800
CACHE = Path.home() / ".cache" / "userturn" / "bench" / "lm_features.jsonl"
TURN_TOKENS = 48
"""A turn is scored on its first tokens: its act and voice show early, and the logits of
every scored position are the cost (49,152 floats each)."""
ORDER = (
    "judge_train.jsonl",
    "judge_dev.jsonl",
    "judge_human.jsonl",
    "judge_human_heldout.jsonl",
    "judge_realistic.jsonl",
)
"""Small models' and people's turns first: the strata whose targets the judge misses."""


def cut(text: str) -> str:
    """At most ``KEEP_CHARS``: the start and the end, where a turn's referents mostly are."""
    if len(text) <= KEEP_CHARS:
        return text
    half = KEEP_CHARS // 2
    return text[:half] + " ... " + text[-half:]


def last_exchange(messages: list[Message]) -> list[Message]:
    """The last user request and the assistant answer after it, each cut."""
    answer = messages[-1]
    request = next(m for m in reversed(messages[:-1]) if m["role"] == "user")
    return [
        {"role": "user", "content": cut(str(request.get("content") or ""))},
        {"role": "assistant", "content": cut(str(answer.get("content") or ""))},
    ]


def key(row: dict[str, Any]) -> str:
    turn = hashlib.sha256(str(row["user_turn"]).encode()).hexdigest()[:12]
    return f"{row['id']}/{turn}"


def all_rows() -> list[dict[str, Any]]:
    rows = []
    paths = {p.name: p for p in [*default_references(), heldout_reference()]}
    for path in sorted(paths.values(), key=lambda p: ORDER.index(p.name)):
        rows += [{**r, "_file": path.name} for r in read_rows(path)]
    return rows


def counterfactual(row: dict[str, Any], pool: list[dict[str, Any]]) -> str:
    """Another conversation's answer from the same file, fixed by the row's id."""
    first = str(row["messages"][0].get("content") or "")
    others = [r for r in pool if str(r["messages"][0].get("content") or "") != first]
    pick = int(hashlib.sha256(str(row["id"]).encode()).hexdigest()[:8], 16) % len(others)
    return str(others[pick]["messages"][-1].get("content") or "")


class Scorer:
    def __init__(self) -> None:
        self.be = LlamaCppBackend(Spec("llamacpp", "smollm2-135m", {"n_ctx": "2048"}))
        self.tpl = self.be.template(TemplateOptions(date=dt.date(2026, 1, 1)))
        self.markers = derive_markers(self.tpl)
        full = self.tpl.render([{"role": "user", "content": SENTINEL}])
        self.alone = self.tpl.strip_bos(full[: full.index(SENTINEL)])
        eval_prompt(self.be.llm, self.be.tokenize(self.alone))  # as every later row finds it

    def turn_lp(self, prompt: str, turn: str) -> tuple[float, int]:
        """Mean log-probability of the turn's first ``TURN_TOKENS`` tokens after ``prompt``,
        and their count.

        Unlike ``LlamaCppBackend.loglikelihood``, the prompt is not evaluated fresh: it is
        evaluated on top of whatever prefix the cache shares with it (the previous
        condition's), without logits, and only the turn's positions get them.
        """
        be, llm = self.be, self.be.llm
        p = be.tokenize(prompt)
        u = continuation_ids(be.tokenize, be._piece, prompt, p, turn)[:TURN_TOKENS]
        eval_prompt(llm, p)
        got = _score_one(llm, len(p), np.array(logits_row(llm, -1)), u)
        return got.logprob / got.n_tokens, got.n_tokens

    def row(self, row: dict[str, Any], cf_answer: str) -> dict[str, float]:
        ctx = last_exchange(list(row["messages"]))
        turn = str(row["user_turn"])
        if not turn.strip():
            return {}
        user = user_turn_prompt(self.tpl, ctx, self.markers).prompt
        asst = assistant_turn_prompt(self.tpl, ctx, self.markers, user)
        cf_ctx = with_answer(ctx, cut(cf_answer))
        out: dict[str, float] = {}
        out["user"], n = self.turn_lp(user, turn)
        if asst is not None:
            out["asst"], _ = self.turn_lp(asst, turn)
        out["cf"], _ = self.turn_lp(user_turn_prompt(self.tpl, cf_ctx, self.markers).prompt, turn)
        out["alone"], _ = self.turn_lp(self.alone, turn)
        out["n_turn_tokens"] = float(n)
        return out


def cached() -> dict[str, dict[str, float]]:
    if not CACHE.exists():
        return {}
    out = {}
    for line in CACHE.read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            out[rec["key"]] = rec["features"]
    return out


def main(limit: int | None = None) -> int:
    """Score every row not in the cache yet (the first ``limit`` of them, if given)."""
    rows = all_rows()
    done = cached()
    todo = [r for r in rows if key(r) not in done]
    if limit is not None:
        todo = todo[:limit]
    print(f"{len(rows)} rows, {len(todo)} to score", file=sys.stderr)
    if not todo:
        return 0
    by_file: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_file.setdefault(r["_file"], []).append(r)
    scorer = Scorer()
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with CACHE.open("a") as fh:
        for i, r in enumerate(todo):
            feats = scorer.row(r, counterfactual(r, by_file[r["_file"]]))
            fh.write(json.dumps({"key": key(r), "features": feats}) + "\n")
            fh.flush()
            if i % 50 == 49:
                rate = (i + 1) / (time.perf_counter() - start)
                print(f"{i + 1}/{len(todo)} rows, {rate:.2f} rows/s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(int(sys.argv[1]) if len(sys.argv) > 1 else None))
