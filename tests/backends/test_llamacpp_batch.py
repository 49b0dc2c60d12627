"""Batched k-sample decoding on llama.cpp with the real SmolLM2: the same text as decoding
the samples one after another, deterministic, and leaving the prefix cache usable.

Run: ``.venv/bin/python -m pytest tests/backends/test_llamacpp_batch.py -q`` (budgets are
a dozen tokens per sample, so the module takes seconds on an idle machine).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from userturn.backends import llamacpp_batch as lb
from userturn.backends import load_backend
from userturn.backends.base import TemplateOptions
from userturn.backends.llamacpp import LlamaCppBackend
from userturn.chat import user_turn_prompt
from userturn.errors import UserError
from userturn.spec import Spec
from userturn.types import GenRequest, SamplingParams

DATE = TemplateOptions(date=dt.date(2026, 11, 29))
CTX = [
    {"role": "user", "content": "What is 12 * 3?"},
    {"role": "assistant", "content": "12 * 3 = 36."},
]


def _backend(**options: str) -> LlamaCppBackend:
    return LlamaCppBackend(Spec("llamacpp", "smollm2-135m", {"n_ctx": "1024", **options}))


@pytest.fixture(scope="module")
def batched() -> Iterator[LlamaCppBackend]:
    be = _backend(batch_samples="on", n_seq="8")
    yield be
    be.close()


@pytest.fixture(scope="module")
def sequential() -> Iterator[LlamaCppBackend]:
    be = _backend(batch_samples="off")
    yield be
    be.close()


def _req(
    be: LlamaCppBackend,
    seeds: tuple[int, ...],
    temperature: float = 1.0,
    max_tokens: int = 12,
    top_k: int = 0,
    top_p: float = 1.0,
) -> GenRequest:
    up = user_turn_prompt(be.template(DATE), CTX)
    params = SamplingParams(
        temperature=temperature, top_k=top_k, top_p=top_p, max_tokens=max_tokens, stop=up.stop
    )
    return GenRequest(prompt=up.prompt, role="user", params=params, seeds=seeds)


def test_batched_text_equals_sequential(
    batched: LlamaCppBackend, sequential: LlamaCppBackend
) -> None:
    """8 seeds at T=1 in one batch give exactly the sequential completions."""
    req = _req(batched, tuple(range(1, 9)))
    (together,) = batched.generate([req])
    (one_by_one,) = sequential.generate([req])
    assert lb.streams(batched.llm) == 8  # it did decode them together
    assert lb.streams(sequential.llm) == 1
    assert together.completions == one_by_one.completions
    assert len({c.text for c in together.completions}) > 1
    assert together.prompt_tokens == one_by_one.prompt_tokens
    assert together.prompt_tokens_reused == one_by_one.prompt_tokens_reused


def test_truncated_sampling_in_groups_equals_sequential() -> None:
    """top-k/top-p chains, and k above ``n_seq`` (decoded in groups), keep the text, after
    the very same prompt was evaluated by a one-token request (the first sample then
    draws from that pass's logits, as ``Llama.generate`` does).

    Both backends start empty and see the same requests: a sample's text depends on what
    was cached before its prompt (llama.cpp's logits for a token differ between a prompt
    pass and a one-token pass).
    """
    grouped, plain = _backend(batch_samples="on", n_seq="2"), _backend(batch_samples="off")
    try:
        warm = _req(grouped, (1,), max_tokens=1)
        assert grouped.generate([warm]) == plain.generate([warm])
        req = _req(grouped, (5, 6, 7), top_k=40, top_p=0.9)
        (got,) = grouped.generate([req])
        assert lb.streams(grouped.llm) == 2
        assert got.completions == plain.generate([req])[0].completions
    finally:
        grouped.close()
        plain.close()


def test_deterministic_and_cache_left_clean(batched: LlamaCppBackend) -> None:
    """Same seeds, same texts; afterwards the prompt is cached and a single-seed request
    (the sequential path) gives the sample its seed gave in the batch."""
    req = _req(batched, (3, 4))
    first = batched.generate([req])[0]
    again = batched.generate([req])[0]
    assert first.completions == again.completions
    n = len(batched.tokenize(req.prompt))
    assert (again.prompt_tokens, again.prompt_tokens_reused) == (2 * n, 2 * (n - 1))
    (solo,) = batched.generate([_req(batched, (4,))])
    assert solo.completions[0] == first.completions[1]
    assert solo.prompt_tokens_reused == n - 1


def test_greedy_equals_sequential(batched: LlamaCppBackend, sequential: LlamaCppBackend) -> None:
    req = _req(batched, (1, 2, 3), temperature=0.0)
    (a,) = batched.generate([req])
    assert a.completions == sequential.generate([req])[0].completions
    assert len(a.completions) == 3


def test_length_finish_and_token_counts(
    batched: LlamaCppBackend, sequential: LlamaCppBackend
) -> None:
    req = _req(batched, (1, 2, 3, 4), max_tokens=2)
    (a,) = batched.generate([req])
    assert a.completions == sequential.generate([req])[0].completions
    assert all(c.completion_tokens <= 2 for c in a.completions)
    assert any(c.finish == "length" and c.completion_tokens == 2 for c in a.completions)


def test_options_and_capabilities(batched: LlamaCppBackend, sequential: LlamaCppBackend) -> None:
    assert load_backend("smollm2-135m").capabilities.batched_samples is False  # default off
    assert batched.capabilities.batched_samples and not sequential.capabilities.batched_samples
    assert batched.capabilities.loglikelihood
    assert batched.decode_key == sequential.decode_key == ""  # same text either way
    with pytest.raises(UserError, match="batch_samples"):
        LlamaCppBackend(Spec("llamacpp", "smollm2-135m", {"batch_samples": "maybe"}))
    with pytest.raises(UserError, match="n_seq"):
        LlamaCppBackend(Spec("llamacpp", "smollm2-135m", {"n_seq": "65"}))
