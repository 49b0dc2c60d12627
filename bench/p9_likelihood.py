"""P9: likelihood-probe throughput on llama.cpp (issue L, item 1).

``p9_likelihood_speedup``: contexts/s of ``LlamaCppBackend.loglikelihood`` (each prompt
evaluated once, reusing the cached prefix; 4 candidate user turns scored in its KV
prefix) ÷ a naive scorer that evaluates prompt + candidate from an empty cache for each
candidate. Goal ≥ 2. The naive scorer runs the same code with the cache cleared before
every candidate, so the two differ only in prefix reuse, and their scores must agree
(``p9_max_abs_diff``, nats per continuation: only llama.cpp's batch-shape noise).

Contexts: real user-turn prompts over two answered gsm8k items (reference solutions as
the answers), a few hundred tokens each (``p9_prompt_tokens`` is their mean). The two
scorers take turns context by context (a burst of load hits both); the median ratio over
rounds is reported.

Run: ``.venv/bin/python bench/p9_likelihood.py`` (about 1-2 minutes on 2 idle cores).
Last line: JSON.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import time
from typing import Any

from p8_batched import gsm8k_contexts

from userturn.backends.base import TemplateOptions
from userturn.backends.llamacpp import LlamaCppBackend
from userturn.chat import derive_markers, user_turn_prompt
from userturn.spec import Spec
from userturn.types import ScoreRequest

DATE = TemplateOptions(date=dt.date(2026, 1, 1))
N_CONTEXTS = 4
ROUNDS = 3
CANDIDATES = (
    "Thanks, that makes sense!",
    "Can you explain the second step again?",
    "What if the prices were doubled?",
    "Now solve this one: a train travels 60 miles in 1.5 hours. What is its speed?",
)


def _requests(be: LlamaCppBackend) -> list[ScoreRequest]:
    tpl = be.template(DATE)
    end = derive_markers(tpl).user_end  # e.g. <|im_end|>: part of each candidate
    return [
        ScoreRequest(user_turn_prompt(tpl, ctx).prompt, tuple(c + end for c in CANDIDATES))
        for ctx in gsm8k_contexts(N_CONTEXTS, exchanges=2)
    ]


def _round(
    ours: LlamaCppBackend, naive: LlamaCppBackend, reqs: list[ScoreRequest]
) -> tuple[float, float, float]:
    """(seconds ours, seconds naive, largest score difference), the two scorers taking
    turns context by context so that a burst of load on the machine hits both."""
    t_ours = t_naive = diff = 0.0
    for req in reqs:
        start = time.perf_counter()
        (got,) = ours.loglikelihood([req])
        t_ours += time.perf_counter() - start
        start = time.perf_counter()
        for cand, score in zip(req.continuations, got.scores, strict=True):
            naive.llm.reset()  # an empty cache: the prompt is evaluated for every candidate
            (ref,) = naive.loglikelihood([ScoreRequest(req.prompt, (cand,))])
            diff = max(diff, abs(ref.scores[0].logprob - score.logprob))
        t_naive += time.perf_counter() - start
    return t_ours, t_naive, diff


def main() -> dict[str, Any]:
    ours = LlamaCppBackend(Spec("llamacpp", "smollm2-135m", {"n_ctx": "2048"}))
    naive = LlamaCppBackend(Spec("llamacpp", "smollm2-135m", {"n_ctx": "2048"}))
    reqs = _requests(ours)
    ratios, rates, diffs = [], [], []
    for _ in range(ROUNDS):
        t_ours, t_naive, diff = _round(ours, naive, reqs)
        ratios.append(t_naive / t_ours)
        rates.append(len(reqs) / t_ours)
        diffs.append(diff)
    n_prompt = statistics.mean(len(ours.tokenize(r.prompt)) for r in reqs)
    ours.close()
    naive.close()
    return {
        "p9_likelihood_speedup": round(statistics.median(ratios), 3),
        "p9_ratios": [round(r, 3) for r in ratios],
        "p9_contexts_per_s": round(statistics.median(rates), 2),
        "p9_naive_contexts_per_s": round(statistics.median(rates) / statistics.median(ratios), 2),
        "p9_max_abs_diff": round(max(diffs), 4),
        "p9_prompt_tokens": round(n_prompt),
    }


if __name__ == "__main__":
    print(json.dumps(main()))
