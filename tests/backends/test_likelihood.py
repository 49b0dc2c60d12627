"""Log-likelihood scoring: token boundaries, and llama.cpp and transformers checked against
sums computed here from each engine's own logits, against greedy decoding, and against
each other, on the embedded SmolLM2.

Run: ``.venv/bin/python -m pytest tests/backends/test_likelihood.py -q`` (the hf tests use
the HF export of the embedded GGUF; the first run builds it, about a minute).
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from userturn.backends import llamacpp_batch as lb
from userturn.backends import load_backend
from userturn.backends.base import TemplateOptions
from userturn.backends.likelihood import continuation_ids, target_logprobs
from userturn.backends.llamacpp import LlamaCppBackend
from userturn.chat import user_turn_prompt
from userturn.datasets import load_dataset
from userturn.errors import UserError
from userturn.types import SamplingParams, ScoreRequest

DATE = TemplateOptions(date=dt.date(2026, 11, 29))
CTX = [
    {"role": "user", "content": "Janet has 3 apples and buys 5 more. How many does she have?"},
    {"role": "assistant", "content": "3 + 5 = 8. Janet has 8 apples."},
]
CANDIDATES = (
    "Thanks!<|im_end|>",
    "Can you explain how you added them?<|im_end|>",
    "<|im_start|>assistant\nSure.<|im_end|>",
)
LLAMACPP_VS_HF_MEAN = 0.15
"""Tolerance (nats, mean |difference| per token) between llama.cpp and transformers.

This is a cross-engine comparison, so no exact figure exists: the weights are the same
dequantized Q4_1 values, but llama.cpp quantizes activations to 8 bits for its Q4_1
matmuls and keeps K/V in float16, while transformers runs float32. That quantization,
not the CPU, sets the difference (mean 0.07, max 0.25 per token on gsm8k user-turn
prompts); llama.cpp's batch-shape variance (0.003-0.040 nats across CPUs) is an order
smaller, so the bound holds with room on any CPU. Rankings are compared only between
candidates further apart than the bound allows either engine to move them.
"""


# pure pieces ---------------------------------------------------------------------------


def _merging_tokenizer(text: str) -> list[int]:
    """Characters as their code points, except that "ab" is one token (100)."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("ab", i):
            out, i = [*out, 100], i + 2
        else:
            out, i = [*out, ord(text[i])], i + 1
    return out


def test_continuation_ids_joint_or_separate_at_a_merge() -> None:
    tok = _merging_tokenizer
    ids = tok("xy")
    assert continuation_ids(tok, tok, "xy", ids, "ab!") == [100, ord("!")]  # joint tail
    merged = tok("xa")  # "xa" + "b!" tokenizes as x, ab, ! : no longer starts with x, a
    assert continuation_ids(tok, tok, "xa", merged, "b!") == [ord("b"), ord("!")]
    assert continuation_ids(tok, tok, "xy", ids, "") == []


def test_target_logprobs_is_a_full_softmax() -> None:
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 50)).astype(np.float32) * 5
    targets = [4, 0, 49]
    x = logits.astype(np.float64)
    expected = [
        x[i, t] - x[i].max() - np.log(np.exp(x[i] - x[i].max()).sum())
        for i, t in enumerate(targets)
    ]
    assert np.allclose(target_logprobs(logits, targets), expected, atol=1e-12)


# llama.cpp -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lc() -> Iterator[LlamaCppBackend]:
    be = load_backend("smollm2-135m?n_ctx=1024")
    assert isinstance(be, LlamaCppBackend)
    yield be
    be.close()


@pytest.fixture(scope="module")
def lc1() -> Iterator[LlamaCppBackend]:
    """The same backend, engine and threads as ``lc``, but llama.cpp evaluates one token per
    ``llama_decode`` pass (``n_batch=1``), for prompts and for scored continuations alike.

    Why: llama.cpp does not promise bit-equal logits across batch shapes (its server
    documents that prompt processing and token generation may differ for that reason), and
    the size of the difference depends on the CPU's kernels: 0.003 nats on one machine,
    0.040 on another. With one token per pass, scoring takes exactly the arithmetic path
    that decoding takes, so scoring's own part (which rows, which targets, the softmax) can
    be compared exactly, on any machine.
    """
    import llama_cpp

    be = load_backend("smollm2-135m?n_ctx=1024")
    assert isinstance(be, LlamaCppBackend)
    be.n_threads = 1  # one token per pass gains nothing from threads, and a busy CPU
    be.__dict__["llm"] = llama_cpp.Llama(
        model_path=str(be.path), n_ctx=1024, n_threads=1, n_batch=1, verbose=False
    )
    assert be.llm.n_batch == 1
    yield be
    be.close()


def _prompt(be: Any, ctx: list[dict[str, str]] = CTX) -> str:
    return user_turn_prompt(be.template(DATE), ctx).prompt


def _one_token_scorer(llm: Any, prompt_ids: list[int], ids: list[int]) -> list[float]:
    """A reference scorer: the prompt as ``score_prompt`` evaluates it, then the
    continuation fed one token per ``llama_decode`` pass, each next token's log-probability
    read from that pass's logits row (as decoding reads it)."""
    import llama_cpp

    lb.eval_prompt(llm, prompt_ids)
    out = [float(target_logprobs(lb.logits_row(llm, -1), ids[:1])[0])]
    batch = lb.TokenBatch(1)
    try:
        for j, tok in enumerate(ids[:-1]):
            batch.fill([(0, tok, len(prompt_ids) + j)])
            assert llama_cpp.llama_decode(llm._ctx.ctx, batch.batch) == 0
            out.append(float(target_logprobs(lb.logits_row(llm, 0), [ids[j + 1]])[0]))
    finally:
        batch.close()
        lb.truncate(llm, len(prompt_ids), 1)
    return out


def test_llamacpp_matches_sum_from_its_own_logits(lc1: LlamaCppBackend, smollm2_path: Path) -> None:
    """A fresh llama.cpp with logits for every position, softmaxed here with numpy.

    Both engines evaluate one token per pass (see ``lc1``), so their logits are the same
    float32 values and the only difference left is float64 rounding in the two softmax
    formulas (about 1e-15 nats; 1e-9 allowed)."""
    import llama_cpp

    prompt = _prompt(lc1)
    (res,) = lc1.loglikelihood([ScoreRequest(prompt, CANDIDATES)])
    ref = llama_cpp.Llama(
        model_path=str(smollm2_path),
        n_ctx=1024,
        logits_all=True,
        n_threads=lc1.n_threads,
        n_batch=1,
        verbose=False,
    )
    try:
        p_ids = lc1.tokenize(prompt)
        for cand, got in zip(CANDIDATES, res.scores, strict=True):
            c_ids = lc1.tokenize(prompt + cand)[len(p_ids) :]
            assert c_ids[-1] == lc1.tokenize("<|im_end|>")[0]  # the end marker is one token
            ref.reset()
            ref.eval(p_ids + c_ids)
            rows = np.asarray(ref.scores[len(p_ids) - 1 : len(p_ids) + len(c_ids) - 1], float)
            top = rows.max(axis=1, keepdims=True)
            logz = top[:, 0] + np.log(np.exp(rows - top).sum(axis=1))
            expected = rows[np.arange(len(c_ids)), c_ids] - logz
            assert got.n_tokens == len(c_ids)
            assert np.allclose(got.token_logprobs, expected, rtol=0, atol=1e-9)
            assert got.logprob == pytest.approx(float(expected.sum()), rel=0, abs=1e-9)
    finally:
        ref.close()


def _greedy(be: LlamaCppBackend, prompt: str) -> tuple[list[int], lb.Sample]:
    ids = be.tokenize(prompt)
    lb.eval_prompt(be.llm, ids)
    (sample,) = lb.decode_group(
        be.llm, ids, SamplingParams(temperature=0.0, max_tokens=10), (0,), logprobs=True
    )
    assert sample.tokens and len(sample.logprobs) == len(sample.tokens)
    return ids, sample


def test_llamacpp_score_equals_greedy_decoding_logprobs(lc1: LlamaCppBackend) -> None:
    """Greedy-decode 10 tokens recording each token's log-probability, then score the text
    as the continuation: the tokens coincide, and so do their log-probabilities, exactly,
    because with one token per pass (``lc1``) both read the same logits."""
    prompt = _prompt(lc1)
    ids, sample = _greedy(lc1, prompt)
    (res,) = lc1.loglikelihood([ScoreRequest(prompt, (sample.text,))])
    (got,) = res.scores
    assert lc1.tokenize(prompt + sample.text)[len(ids) :] == sample.tokens  # they coincide
    assert list(got.token_logprobs) == sample.logprobs
    assert list(got.token_logprobs) == _one_token_scorer(lc1.llm, ids, sample.tokens)


def test_llamacpp_batched_scoring_scores_the_greedy_tokens(lc: LlamaCppBackend) -> None:
    """In the shipped configuration (continuations scored in one pass of up to 512 tokens)
    the scored tokens are still exactly the decoded ones, and each is a log-probability.

    Their values are not compared with decoding's here: llama.cpp gives no bound on how much
    logits move with the batch shape (measured: 0.003 nats on one CPU, 0.040 on another), so
    any tolerance would be a property of the machine. ``lc1`` checks the values exactly."""
    prompt = _prompt(lc)
    ids, sample = _greedy(lc, prompt)
    (res,) = lc.loglikelihood([ScoreRequest(prompt, (sample.text,))])
    (got,) = res.scores
    assert lc.tokenize(prompt + sample.text)[len(ids) :] == sample.tokens
    assert got.n_tokens == len(sample.tokens)
    assert all(np.isfinite(x) and x <= 0 for x in got.token_logprobs)
    assert got.logprob == pytest.approx(float(np.sum(got.token_logprobs)), rel=0, abs=1e-12)


def test_llamacpp_reuses_the_prompt_and_accounts(lc: LlamaCppBackend) -> None:
    prompt = _prompt(lc, [*CTX, {"role": "user", "content": "Why?"}, CTX[1]])
    n = len(lc.tokenize(prompt))
    req = ScoreRequest(prompt, ("Thanks!<|im_end|>", "", "Ok<|im_end|>"))
    (first,) = lc.loglikelihood([req])
    (again,) = lc.loglikelihood([req])
    assert first.scores == again.scores
    # each request evaluates its prompt once, fresh; its other continuations reuse it
    assert (again.prompt_tokens, again.prompt_tokens_reused) == (3 * n, 2 * n)
    assert (first.scores[1].logprob, first.scores[1].n_tokens) == (0.0, 0)
    assert all(s.logprob < 0 for s in (first.scores[0], first.scores[2]))


def test_llamacpp_scoring_leaves_generation_unchanged(lc: LlamaCppBackend) -> None:
    from userturn.types import GenRequest

    prompt = _prompt(lc)
    req = GenRequest(prompt, "user", SamplingParams(temperature=1.0, max_tokens=8), seeds=(9,))
    before = lc.generate([req])[0].completions
    lc.loglikelihood([ScoreRequest(prompt, CANDIDATES)])
    assert lc.generate([req])[0].completions == before


def test_llamacpp_context_overflow_is_a_user_error() -> None:
    small = load_backend("smollm2-135m?n_ctx=64")
    with pytest.raises(UserError, match="n_ctx"):
        small.loglikelihood([ScoreRequest(_prompt(small), ("word " * 80 + "<|im_end|>",))])


# transformers --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hf() -> Iterator[Any]:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    be = load_backend("hf:smollm2-135m?threads=1&batch=4")
    yield be
    be.close()


def test_hf_matches_sum_from_its_own_logits(hf: Any) -> None:
    """One unpadded forward per candidate, softmaxed here with numpy, against batched rows."""
    import torch

    prompt = _prompt(hf)
    (res,) = hf.loglikelihood([ScoreRequest(prompt, CANDIDATES)])
    p_ids = hf.tokenize(prompt)
    for cand, got in zip(CANDIDATES, res.scores, strict=True):
        c_ids = hf.tokenize(prompt + cand)[len(p_ids) :]
        with torch.inference_mode():
            logits = hf.model(torch.tensor([p_ids + c_ids])).logits[0].double().numpy()
        rows = logits[len(p_ids) - 1 : -1]
        top = rows.max(axis=1, keepdims=True)
        logz = top[:, 0] + np.log(np.exp(rows - top).sum(axis=1))
        expected = rows[np.arange(len(c_ids)), c_ids] - logz
        assert got.n_tokens == len(c_ids)
        assert np.allclose(got.token_logprobs, expected, atol=1e-3)


def test_hf_score_equals_greedy_decoding_logprobs(hf: Any) -> None:
    import torch

    prompt = _prompt(hf)
    ids = hf.tokenize(prompt)
    with torch.inference_mode():
        out = hf.model.generate(
            input_ids=torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=10,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
        )
    new = out.sequences[0, len(ids) :].tolist()
    eos = hf.eos_ids()
    new = new[: next((i for i, t in enumerate(new) if t in eos), len(new))]
    assert new
    steps = [float(target_logprobs(out.logits[i][0].numpy(), [t])[0]) for i, t in enumerate(new)]
    text = hf.tokenizer.decode(new, skip_special_tokens=False)
    (res,) = hf.loglikelihood([ScoreRequest(prompt, (text,))])
    assert hf.tokenize(prompt + text)[len(ids) :] == new  # they coincide
    assert np.allclose(res.scores[0].token_logprobs, steps, atol=1e-3)


def test_llamacpp_and_hf_agree(lc: LlamaCppBackend, hf: Any) -> None:
    """Same candidates after real gsm8k user-turn prompts: per-token log-probabilities agree
    to ``LLAMACPP_VS_HF_MEAN`` nats on average, and the candidates rank the same."""
    reqs = []
    for item in load_dataset("gsm8k").load()[:2]:
        ctx = [*item.messages, {"role": "assistant", "content": "Let me see. The answer is 18."}]
        reqs.append(ScoreRequest(_prompt(lc, ctx), CANDIDATES))
    a, b = lc.loglikelihood(reqs), hf.loglikelihood(reqs)
    diffs = []
    for x, y in zip(a, b, strict=True):
        assert [s.n_tokens for s in x.scores] == [s.n_tokens for s in y.scores]
        for s, t in zip(x.scores, y.scores, strict=True):
            diffs += list(np.abs(np.subtract(s.token_logprobs, t.token_logprobs)))
        for (s1, t1), (s2, t2) in itertools.combinations(zip(x.scores, y.scores, strict=True), 2):
            slack = 4 * LLAMACPP_VS_HF_MEAN * (s1.n_tokens + s2.n_tokens)
            if abs(s1.logprob - s2.logprob) > slack:  # clearly ordered: both engines agree
                assert (s1.logprob > s2.logprob) == (t1.logprob > t2.logprob)
    assert float(np.mean(diffs)) < LLAMACPP_VS_HF_MEAN
    assert float(np.max(diffs)) < 4 * LLAMACPP_VS_HF_MEAN


def test_llamacpp_scores_do_not_depend_on_request_order(lc: LlamaCppBackend) -> None:
    """The same (prompt, continuation) pairs scored in two orders, on one engine whose KV
    prefix carries over between requests: every pair gets the same value."""
    other = [*CTX, {"role": "user", "content": "And for a cat?"}, CTX[1]]
    reqs = [
        ScoreRequest(_prompt(lc), ("Thanks!", "Why is that?")),
        ScoreRequest(_prompt(lc, other), ("Ok.", "Thanks!")),
    ]
    forward = lc.loglikelihood(reqs)
    backward = lc.loglikelihood(reqs[::-1])[::-1]
    for a, b in zip(forward, backward, strict=True):
        assert [s.token_logprobs for s in a.scores] == [s.token_logprobs for s in b.scores]
