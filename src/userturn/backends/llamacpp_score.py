"""Log-likelihood of continuations on llama.cpp, each scored in the prompt's KV prefix.

Each request's prompt is evaluated from an empty cache, once; the last prompt position's
logits score every continuation's first token; the rest of a continuation is evaluated
after the prompt in sequence 0, with logits for every position, and its cells are dropped
again before the next one. No continuation re-evaluates the prompt, which is the whole
speed-up over scoring ``prompt + continuation`` from scratch.

The prompt is *not* continued from whatever the cache held before (the previous request,
or a generation). llama.cpp picks its matmul kernels by batch size, so a prompt whose
first tokens were evaluated as part of another prompt's batch gets other values: measured
on the embedded SmolLM2, the same pair scored after a different request moved by up to
0.09 nats per token. Evaluated fresh, a score depends on its own request alone, so
requests in any order give equal values.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from userturn.backends.likelihood import score, target_logprobs
from userturn.backends.llamacpp_batch import TokenBatch, eval_prompt, logits_row, truncate
from userturn.types import ContinuationScore, ScoreResult


def score_prompt(llm: Any, prompt_ids: list[int], continuations: list[list[int]]) -> ScoreResult:
    """Scores for token-id continuations of ``prompt_ids`` (already checked to fit n_ctx)."""
    n_prompt = len(prompt_ids)
    llm.n_tokens = 0  # a fresh evaluation: see the module docstring
    reused = eval_prompt(llm, prompt_ids)
    first = np.array(logits_row(llm, -1))  # copied: the next decode overwrites it
    try:
        scores = tuple(_score_one(llm, n_prompt, first, ids) for ids in continuations)
    finally:
        truncate(llm, n_prompt, 1)
    m = len(continuations)
    # Like GenResult: each continuation needs the prompt; all but the first take it whole.
    return ScoreResult(
        scores,
        prompt_tokens=n_prompt * m,
        prompt_tokens_reused=(reused + (m - 1) * n_prompt) if m else 0,
    )


def _score_one(
    llm: Any, n_prompt: int, first: np.ndarray[Any, Any], ids: list[int]
) -> ContinuationScore:
    if not ids:
        return score([])
    lps = [float(target_logprobs(first, ids[:1])[0])]
    if len(ids) > 1:
        logits = _all_logits(llm, n_prompt, ids[:-1])
        lps += [float(x) for x in target_logprobs(logits, ids[1:])]
        truncate(llm, n_prompt, 1)
    return score(lps)


def _all_logits(llm: Any, start: int, ids: list[int]) -> np.ndarray[Any, Any]:
    """Evaluate ``ids`` at positions ``start..`` of sequence 0; the logits of every row."""
    import llama_cpp

    n_vocab, step = llm.n_vocab(), llm.n_batch
    rows = []
    batch = TokenBatch(min(step, len(ids)))
    try:
        for at in range(0, len(ids), step):
            chunk = ids[at : at + step]
            batch.fill([(0, tok, start + at + j) for j, tok in enumerate(chunk)])
            if llama_cpp.llama_decode(llm._ctx.ctx, batch.batch) != 0:
                raise RuntimeError("llama_decode failed while scoring")
            ptr = llama_cpp.llama_get_logits(llm._ctx.ctx)
            rows.append(np.ctypeslib.as_array(ptr, shape=(len(chunk), n_vocab)).copy())
    finally:
        batch.close()
    return np.concatenate(rows)
