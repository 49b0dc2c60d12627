"""Batched k-sample decoding on llama.cpp: one prompt pass, k sequences, one batch per step.

The k samples of a prompt share it. The prompt is evaluated once into sequence 0 (reusing
the longest cached prefix, as the sequential path does), its KV is copied to sequences
1..k-1 (``llama_memory_seq_cp``), and every step decodes the next token of all live
samples in one ``llama_decode``. Each sample draws from its own sampler chain, seeded
with its own seed, built like llama-cpp-python's (top-k, top-p, min-p 0, temperature,
then ``dist(seed)``; greedy at T=0).

Equivalence with sequential decoding: the same seeds give the same text, token for token
(tests/backends/test_llamacpp_batch.py checks it at T=1, with top-k/top-p, in groups).
Three things make that hold, found by comparing logits:

- One KV *stream* per sequence (``kv_unified=False``): a sample attends only to its own
  stream's cells, laid out as in a single-sequence cache. The unified cache (one stream
  shared by all sequences) would store the prompt once, but in llama.cpp 0.3.36 it gives
  logits up to ~1 away from sequential decoding (upstream ggml-org/llama.cpp#24962).
- One token per sequence per decode: a batch of such rows gives each row the logits a
  one-token decode gives (checked bit for bit up to 33 rows).
- The prompt's last token. llama.cpp's logits for a token differ by up to ~0.4 between a
  many-token pass over its sequence (the prompt pass) and a one-token pass, and
  ``Llama.generate`` re-evaluates the prompt's last token alone for every sample after
  the first. So sequence 0 samples from the prompt pass like the first sequential sample,
  and sequences 1.. re-evaluate the last token (one row each, in one batch) like the
  later ones. A seed's text therefore depends on its position among the request's seeds,
  and on what was cached before the prompt, in both modes alike.

Cost of streams: each stream holds ``n_ctx`` cells, so the context allocates
``n_ctx * streams`` cells, and copying the prompt to a stream copies that stream's buffer.
The streams are made when the model loads (``add_streams``, ``?n_seq=``, default 4); a
request with more samples decodes them in groups of that size, which gives the same text.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from userturn.backends.likelihood import target_logprobs
from userturn.types import Completion, Finish, SamplingParams

log = logging.getLogger(__name__)

MAX_STREAMS = 64
"""Most sequences decoded together; each costs ``n_ctx`` KV cells of memory."""


def first_stop(text: str, stops: tuple[str, ...]) -> int | None:
    hits = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return min(hits) if hits else None


@dataclass
class Sample:
    """One sample's tokens and text, cut the same way by the sequential and batched paths:
    an end-of-generation token ends it (not kept, finish "stop"), a stop string ends it
    (cut before the stop, finish "stop"), ``max_tokens`` kept tokens end it ("length")."""

    stop: tuple[str, ...]
    max_tokens: int
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    finish: Finish = "length"
    logprobs: list[float] = field(default_factory=list)

    def push(self, token: int, eog: bool, detokenize: Callable[[list[int]], str]) -> bool:
        """Take the next sampled token; True when the sample is finished."""
        if eog:
            self.finish = "stop"
            return True
        self.tokens.append(token)
        self.text = detokenize(self.tokens)
        cut = first_stop(self.text, self.stop)
        if cut is not None:
            self.text, self.finish = self.text[:cut], "stop"
            return True
        return len(self.tokens) >= self.max_tokens

    def completion(self) -> Completion:
        return Completion(text=self.text, finish=self.finish, completion_tokens=len(self.tokens))


def _llama_cpp() -> Any:
    import llama_cpp

    return llama_cpp


def _internals() -> Any:
    """llama-cpp-python's object wrappers (context, batch, sampler chain); untyped."""
    from llama_cpp import _internals as internals

    return internals


def streams(llm: Any) -> int:
    return int(_llama_cpp().llama_n_seq_max(llm._ctx.ctx))


def add_streams(llm: Any, n: int, n_ctx: int) -> None:
    """Give a freshly loaded ``llm`` a context with ``n`` KV streams of ``n_ctx`` cells.

    llama-cpp-python's ``Llama`` has no ``n_seq_max`` argument, so its context is replaced
    by one made from the same model and parameters plus ``n_seq_max``. Only at load: a
    cached sequence cannot move to the new context (llama.cpp refuses a one-stream state
    in a many-stream cache), and restarting from an empty cache mid-run would change the
    next sample's text (see "the prompt's last token" above).
    """
    if llm.n_tokens:
        raise RuntimeError("add_streams must run before anything is evaluated")
    params = llm.context_params
    params.n_seq_max, params.kv_unified, params.n_ctx = n, False, n_ctx * n
    log.info("llama.cpp context: %d KV streams of %d tokens", n, n_ctx)
    old = llm._ctx
    llm._ctx = _internals().LlamaContext(model=llm._model, params=params, verbose=False)
    old.close()


def eval_prompt(llm: Any, tokens: list[int]) -> int:
    """Evaluate ``tokens`` into sequence 0 exactly as ``Llama.generate`` would, so that the
    logits the first sample draws from (batch row -1) are the ones it would draw from.

    That is: when the cache holds exactly this prompt and its logits are live, nothing is
    evaluated; otherwise the longest cached prefix is kept, except that the last token is
    always re-evaluated. Returns the reused count as ``LlamaCppBackend`` reports it (the
    prefix of ``tokens[:-1]`` in the cache).
    """
    cached = llm._input_ids[: llm.n_tokens]
    n = 0
    for a, b in zip(cached, tokens[:-1], strict=False):
        if a != b:
            break
        n += 1
    exact = llm.n_tokens == len(tokens) and n == len(tokens) - 1 and cached[-1] == tokens[-1]
    if not (exact and not llm._requires_eval):
        llm.n_tokens = n  # ``eval`` drops sequence 0's cells from here on
        llm.eval(tokens[n:])
    return n


def truncate(llm: Any, n_prompt: int, n_seqs: int) -> None:
    """Drop generated cells: sequences 1.. entirely, sequence 0 after the prompt.

    ``_requires_eval`` stops ``Llama.generate`` from sampling off stale logits when the
    next prompt is exactly this one.
    """
    lc = _llama_cpp()
    mem = llm._ctx.memory
    for seq in range(1, n_seqs):
        lc.llama_memory_seq_rm(mem, seq, -1, -1)
    lc.llama_memory_seq_rm(mem, 0, n_prompt, -1)
    llm.n_tokens = n_prompt
    llm._requires_eval = True


def sampler(params: SamplingParams, seed: int | None) -> Any:
    """A sampler chain equal in effect to the one ``Llama.generate`` builds for our params
    (its repeat penalty 1.0 and typical-p 1.0 stages are no-ops, so they are left out)."""
    chain = _internals().LlamaSampler()
    if params.temperature == 0:
        chain.add_greedy()
        return chain
    chain.add_top_k(params.top_k)
    chain.add_top_p(params.top_p, 1)
    chain.add_min_p(0.0, 1)
    chain.add_temp(params.temperature)
    chain.add_dist(_llama_cpp().LLAMA_DEFAULT_SEED if seed is None else seed)
    return chain


def logits_row(llm: Any, row: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    ptr = _llama_cpp().llama_get_logits_ith(llm._ctx.ctx, row)
    return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),))


class TokenBatch:
    """A ``llama_batch`` of one token per live sample, each in its own sequence."""

    def __init__(self, size: int) -> None:
        self._owner = _internals().LlamaBatch(n_tokens=size, embd=0, n_seq_max=1, verbose=False)
        self.batch = self._owner.batch

    def fill(self, items: list[tuple[int, int, int]]) -> None:
        """``items``: (sequence, token, position) per row; every row returns logits."""
        b = self.batch
        b.n_tokens = len(items)
        for j, (seq, token, pos) in enumerate(items):
            b.token[j], b.pos[j], b.n_seq_id[j], b.logits[j] = token, pos, 1, 1
            b.seq_id[j][0] = seq

    def close(self) -> None:
        self._owner.close()


def decode_group(
    llm: Any,
    prompt: list[int],
    params: SamplingParams,
    seeds: tuple[int | None, ...],
    logprobs: bool = False,
) -> list[Sample]:
    """Decode one sample per seed after ``prompt`` was just evaluated into sequence 0.

    Needs ``len(seeds)`` streams. Sequence 0 samples from the prompt pass's logits, like
    the first sequential sample; the other sequences re-evaluate the prompt's last token
    first, as ``Llama.generate`` does for every later sample (see the module docstring).
    ``logprobs`` also records each kept token's full-softmax log-probability at T=1.
    """
    lc = _llama_cpp()
    n_prompt, k = len(prompt), len(seeds)
    chains = [sampler(params, seed) for seed in seeds]
    samples = [Sample(params.stop, params.max_tokens) for _ in seeds]
    batch = TokenBatch(k)
    try:
        items = _step(llm, chains, samples, {0: -1}, logprobs)
        if k > 1:
            _replay_last(llm, prompt, k, batch)
            items += _step(llm, chains, samples, {s: s - 1 for s in range(1, k)}, logprobs)
        while items:
            batch.fill([(seq, tok, n_prompt + len(samples[seq].tokens) - 1) for seq, tok in items])
            if lc.llama_decode(llm._ctx.ctx, batch.batch) != 0:
                raise RuntimeError("llama_decode failed (KV cache full?)")
            rows = {seq: j for j, (seq, _) in enumerate(items)}
            items = _step(llm, chains, samples, rows, logprobs)
    finally:
        batch.close()
        for chain in chains:
            chain.close()
        truncate(llm, n_prompt, k)
    return samples


def _replay_last(llm: Any, prompt: list[int], k: int, batch: TokenBatch) -> None:
    """Copy the prompt to sequences 1..k-1 and re-evaluate its last token in each."""
    lc = _llama_cpp()
    mem, last = llm._ctx.memory, len(prompt) - 1
    for seq in range(1, k):
        lc.llama_memory_seq_cp(mem, 0, seq, -1, -1)
        lc.llama_memory_seq_rm(mem, seq, last, -1)
    batch.fill([(seq, prompt[last], last) for seq in range(1, k)])
    if lc.llama_decode(llm._ctx.ctx, batch.batch) != 0:
        raise RuntimeError("llama_decode failed (KV cache full?)")


def _step(
    llm: Any,
    chains: list[Any],
    samples: list[Sample],
    rows: dict[int, int],
    logprobs: bool,
) -> list[tuple[int, int]]:
    """Sample every live sequence from its logits row; (sequence, token) of those going on."""
    lc = _llama_cpp()
    vocab = llm._model.vocab
    out = []
    for seq, row in rows.items():
        token = int(chains[seq].sample(llm._ctx, row))
        eog = bool(lc.llama_vocab_is_eog(vocab, token))
        if logprobs and not eog:
            samples[seq].logprobs.append(float(target_logprobs(logits_row(llm, row), [token])[0]))
        if not samples[seq].push(token, eog, lambda ids: _detok(llm, ids)):
            out.append((seq, token))
    return out


def _detok(llm: Any, ids: list[int]) -> str:
    return str(llm.detokenize(ids, special=True).decode("utf-8", errors="replace"))


__all__ = [
    "MAX_STREAMS",
    "Sample",
    "TokenBatch",
    "add_streams",
    "decode_group",
    "eval_prompt",
    "first_stop",
    "logits_row",
    "sampler",
    "streams",
    "truncate",
]
