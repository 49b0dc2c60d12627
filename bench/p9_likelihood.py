"""P9: likelihood-probe throughput on llama.cpp, for the version 2 measures.

A version 2 context is five requests (``run.likelihood.score_requests``): the user-turn
prompt (4 candidates), the same context under the template's assistant header (2), and
3 counterfactual answers under the user header (2 each), 12 continuations in all, none
followed by the end marker. ``p9_likelihood_speedup``: contexts/s of
``LlamaCppBackend.loglikelihood`` on those requests (each prompt evaluated once, reusing
the prefix it shares with the previous one; candidates scored in its KV prefix) ÷ a
naive scorer that evaluates prompt + candidate from an empty cache for each candidate.
Goal ≥ 2. The naive scorer runs the same code with the cache cleared before
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
from userturn.run.likelihood import conditioned, score_requests
from userturn.run.likelihood_plan import assistant_turn_prompt, with_answer
from userturn.spec import Spec
from userturn.types import Message, ScoreRequest

DATE = TemplateOptions(date=dt.date(2026, 1, 1))
N_CONTEXTS = 4
ROUNDS = 3
CANDIDATES = (
    "Thanks, that makes sense!",
    "Can you explain the second step again?",
    "What if the prices were doubled?",
    "Now solve this one: a train travels 60 miles in 1.5 hours. What is its speed?",
)


def _requests(be: LlamaCppBackend) -> list[list[ScoreRequest]]:
    """Each context's version 2 requests; counterfactual answers are the other contexts'."""
    tpl = be.template(DATE)
    markers = derive_markers(tpl)
    contexts = gsm8k_contexts(N_CONTEXTS, exchanges=2)
    kinds = ("real", "previous_turn_restate", "assistant_turn_restate", "new_task_prompt")
    out = []
    for i, ctx in enumerate(contexts):
        others = [str(c[-1]["content"]) for j, c in enumerate(contexts) if j != i][:3]
        prompts = _prompts(tpl, markers, ctx, others)
        cands = conditioned(list(zip(kinds, CANDIDATES, strict=True)), len(others))
        out.append(score_requests(cands, prompts, markers.user_end))
    return out


def _prompts(tpl: Any, markers: Any, ctx: list[Message], others: list[str]) -> dict[str, str]:
    user = user_turn_prompt(tpl, ctx, markers).prompt
    prompts = {"user": user, "assistant": assistant_turn_prompt(tpl, ctx, markers, user) or ""}
    for k, text in enumerate(others):
        prompts[f"cf{k}"] = user_turn_prompt(tpl, with_answer(ctx, text), markers).prompt
    return prompts


def _round(
    ours: LlamaCppBackend, naive: LlamaCppBackend, contexts: list[list[ScoreRequest]]
) -> tuple[float, float, float]:
    """(seconds ours, seconds naive, largest score difference), the two scorers taking
    turns context by context so that a burst of load on the machine hits both."""
    t_ours = t_naive = diff = 0.0
    for reqs in contexts:
        start = time.perf_counter()
        got = ours.loglikelihood(reqs)
        t_ours += time.perf_counter() - start
        start = time.perf_counter()
        for req, res in zip(reqs, got, strict=True):
            for cand, score in zip(req.continuations, res.scores, strict=True):
                naive.llm.reset()  # an empty cache: the prompt is evaluated for every one
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
    n_prompt = statistics.mean(len(ours.tokenize(r[0].prompt)) for r in reqs)
    n_scored = statistics.mean(
        sum(len(ours.tokenize(r.prompt + c)) - len(ours.tokenize(r.prompt)) for r in rs
            for c in r.continuations)
        for rs in reqs
    )  # fmt: skip
    ours.close()
    naive.close()
    return {
        "p9_likelihood_speedup": round(statistics.median(ratios), 3),
        "p9_ratios": [round(r, 3) for r in ratios],
        "p9_contexts_per_s": round(statistics.median(rates), 2),
        "p9_naive_contexts_per_s": round(statistics.median(rates) / statistics.median(ratios), 2),
        "p9_max_abs_diff": round(max(diffs), 4),
        "p9_prompt_tokens": round(n_prompt),
        "p9_requests_per_context": len(reqs[0]),
        "p9_scored_tokens_per_context": round(n_scored),
    }


if __name__ == "__main__":
    print(json.dumps(main()))
