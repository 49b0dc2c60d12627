"""Engine-independent pieces of log-likelihood scoring: where a continuation's tokens
start, and log-probabilities from raw logits.

Token boundary. The continuation's tokens are the tail of ``tokenize(prompt +
continuation)`` after the prompt's own tokens, when that tokenization starts with them:
then the scored ids are exactly what one tokenizer pass over the whole text gives, for
every vocab type. When the two texts merge at the boundary (a BPE merge across it, so the
joint ids do not start with the prompt's ids), the continuation is tokenized on its own,
special tokens parsed. That is also what generation produces: the model continues the
prompt's fixed ids, never re-tokenizing them. Either way the candidate's user end marker
(``<|im_end|>``) is one special token, as the template renders it.

Log-probabilities are natural-log, at temperature 1, over the full vocabulary (no top-k,
no top-p), computed in float64 from the engine's float32 logits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from userturn.types import ContinuationScore


def continuation_ids(
    tokenize: Callable[[str], list[int]],
    tokenize_piece: Callable[[str], list[int]],
    prompt: str,
    prompt_ids: Sequence[int],
    continuation: str,
) -> list[int]:
    """The continuation's token ids after ``prompt_ids`` (see the module docstring).

    ``tokenize`` is how the engine tokenizes a whole prompt (runtime BOS included);
    ``tokenize_piece`` tokenizes a fragment with special tokens parsed and no BOS.
    """
    if not continuation:
        return []
    joint = tokenize(prompt + continuation)
    n = len(prompt_ids)
    if len(joint) > n and list(joint[:n]) == list(prompt_ids):
        return list(joint[n:])
    return tokenize_piece(continuation)


def target_logprobs(logits: NDArray[np.floating], targets: Sequence[int]) -> NDArray[np.float64]:
    """``log p(targets[i] | row i)`` for logits rows (one row per target), full softmax."""
    rows = np.asarray(logits, dtype=np.float64).reshape(len(targets), -1)
    from scipy.special import log_softmax  # scipy is slow to import: on use

    lp = log_softmax(rows, axis=1)
    return np.asarray(lp[np.arange(len(targets)), np.asarray(targets, dtype=np.int64)])


def score(token_logprobs: Sequence[float]) -> ContinuationScore:
    """A ``ContinuationScore`` from per-token log-probabilities (summed in float64)."""
    values = tuple(float(x) for x in token_logprobs)
    return ContinuationScore(
        logprob=float(np.sum(values, dtype=np.float64)),
        n_tokens=len(values),
        token_logprobs=values,
    )
