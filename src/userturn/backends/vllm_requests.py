"""Pure request building for the vLLM backend: engine kwargs, sampling kwargs, the list of
vLLM requests for a batch of ``GenRequest``s (or ``ScoreRequest``s), and turning vLLM's
outputs back into ``GenResult``s (``ScoreResult``s). No vLLM import, so all of it is
unit-tested on machines without vLLM.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from userturn.backends.base import ModelOptions
from userturn.backends.likelihood import score
from userturn.errors import UserError
from userturn.types import (
    Completion,
    Finish,
    GenRequest,
    GenResult,
    SamplingParams,
    ScoreResult,
)


@dataclass(frozen=True)
class VLLMOptions(ModelOptions):
    tp: int = 1
    pp: int = 1
    ray: bool = False
    dtype: str | None = None
    tokenizer: str | None = None
    revision: str | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    adapter: str | None = None
    max_lora_rank: int | None = None
    """None: the adapter's own rank (its ``adapter_config.json``)."""
    sampling: str = "seed"


def engine_args(opts: VLLMOptions, model: str, local_gpus: int) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM``; Ray when tp*pp is more GPUs than this node has
    (a multi-node run), or when ``?ray=on`` asks for it."""
    args: dict[str, Any] = {
        "model": model,
        "enable_prefix_caching": True,
        "tensor_parallel_size": opts.tp,
        "pipeline_parallel_size": opts.pp,
    }
    if opts.ray or 0 < local_gpus < opts.tp * opts.pp:
        args["distributed_executor_backend"] = "ray"
    passed = {
        "dtype": opts.dtype,
        "tokenizer": opts.tokenizer,
        "revision": opts.revision,
        "max_model_len": opts.max_model_len,
        "gpu_memory_utilization": opts.gpu_memory_utilization,
    }
    args.update({k: v for k, v in passed.items() if v is not None})
    if opts.adapter:
        args["enable_lora"] = True
        args["max_lora_rank"] = opts.max_lora_rank or _adapter_rank(opts.adapter)
    return args


def _adapter_rank(adapter: str | None) -> int:
    cfg = Path(str(adapter)) / "adapter_config.json"
    if not cfg.is_file():
        raise UserError(
            "not a PEFT adapter folder (no adapter_config.json)", file=str(adapter), field="adapter"
        )
    return int(json.loads(cfg.read_text(encoding="utf-8")).get("r", 16))


def sampling_args(params: SamplingParams, seed: int | None, n: int = 1) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams``, matching the llama.cpp backend:
    no penalties, special tokens kept in the text (template artifacts stay visible to the
    judge), stop strings and EOS cut without being included."""
    greedy = params.temperature == 0
    return {
        "n": n,
        "temperature": params.temperature,
        "top_p": 1.0 if greedy else params.top_p,
        "top_k": -1 if greedy or params.top_k <= 0 else params.top_k,
        "min_p": 0.0,
        "max_tokens": params.max_tokens,
        "stop": list(params.stop),
        "seed": None if greedy else seed,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "skip_special_tokens": False,
        "spaces_between_special_tokens": False,
        "include_stop_str_in_output": False,
    }


@dataclass(frozen=True)
class Call:
    """One vLLM request: the samples of ``request`` it produces, in order."""

    request: int
    samples: tuple[int, ...]
    prompt_token_ids: tuple[int, ...]
    sampling: dict[str, Any]
    copies: bool = False
    """Greedy: one output stands for every sample (k greedy copies are identical)."""


def plan_calls(requests: list[GenRequest], ids: list[list[int]], mode: str) -> list[Call]:
    calls = []
    for ri, (req, toks) in enumerate(zip(requests, ids, strict=True)):
        k = len(req.seeds)
        every = tuple(range(k))
        if req.params.temperature == 0:
            calls.append(Call(ri, every, tuple(toks), sampling_args(req.params, None), True))
        elif mode == "n":
            calls.append(Call(ri, every, tuple(toks), sampling_args(req.params, req.seeds[0], k)))
        else:
            calls += [
                Call(ri, (i,), tuple(toks), sampling_args(req.params, s))
                for i, s in enumerate(req.seeds)
            ]
    return calls


def _finish(reason: str | None) -> Finish:
    return "length" if reason == "length" else "error" if reason == "abort" else "stop"


def collect(requests: list[GenRequest], calls: list[Call], outputs: list[Any]) -> list[GenResult]:
    """vLLM ``RequestOutput``s (in call order) → one ``GenResult`` per request."""
    comps: dict[int, dict[int, Completion]] = {i: {} for i in range(len(requests))}
    tokens = [0] * len(requests)
    cached = [0] * len(requests)
    for call, out in zip(calls, outputs, strict=True):
        got = [
            Completion(
                text=o.text, finish=_finish(o.finish_reason), completion_tokens=len(o.token_ids)
            )
            for o in out.outputs
        ]
        if call.copies:
            got = got * len(call.samples)
        for idx, comp in zip(call.samples, got, strict=True):
            comps[call.request][idx] = comp
        share = len(call.samples) if call.copies else len(got)
        tokens[call.request] += len(out.prompt_token_ids) * share
        cached[call.request] += int(getattr(out, "num_cached_tokens", 0) or 0) * share
    return [
        GenResult(
            tuple(comps[i][s] for s in range(len(r.seeds))),
            prompt_tokens=tokens[i],
            prompt_tokens_reused=cached[i],
        )
        for i, r in enumerate(requests)
    ]


def score_args() -> dict[str, Any]:
    """``vllm.SamplingParams`` for scoring: the prompt's own token log-probabilities
    (``prompt_logprobs=0``: the actual token only) from the raw logits, i.e. temperature 1
    and no truncation; one throwaway generated token, not detokenized."""
    return {
        "n": 1,
        "max_tokens": 1,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": -1,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "prompt_logprobs": 0,
        "detokenize": False,
    }


def score_engine_args(args: dict[str, Any]) -> dict[str, Any]:
    """The engine scoring runs on: the same one with prefix caching off. vLLM computes
    prompt log-probabilities only for tokens it evaluates (a cached prefix has none), and
    with caching on its results have been reported to depend on request order; with it
    off every request is one full prefill, so a score never depends on its neighbours."""
    return {**args, "enable_prefix_caching": False}


@dataclass(frozen=True)
class ScoreCall:
    """One vLLM request scoring continuation ``continuation`` of request ``request``:
    prompt + continuation ids, the continuation starting at ``start``."""

    request: int
    continuation: int
    prompt_token_ids: tuple[int, ...]
    start: int


def plan_scores(prompt_ids: list[list[int]], conts: list[list[list[int]]]) -> list[ScoreCall]:
    """One call per non-empty continuation (an empty one scores 0 without a call)."""
    return [
        ScoreCall(ri, ci, (*ids, *cont), len(ids))
        for ri, (ids, cs) in enumerate(zip(prompt_ids, conts, strict=True))
        for ci, cont in enumerate(cs)
        if cont
    ]


def collect_scores(
    prompt_ids: list[list[int]],
    conts: list[list[list[int]]],
    calls: list[ScoreCall],
    outputs: list[Any],
) -> list[ScoreResult]:
    """vLLM ``RequestOutput``s (in call order) → one ``ScoreResult`` per request.

    ``prompt_logprobs[j]`` maps token ids to ``Logprob``s for prompt position ``j`` (None
    at 0); the actual token is always among them.
    """
    lps: dict[tuple[int, int], list[float]] = {}
    cached = [0] * len(prompt_ids)
    for call, out in zip(calls, outputs, strict=True):
        ids = call.prompt_token_ids
        lps[(call.request, call.continuation)] = [
            float(out.prompt_logprobs[j][ids[j]].logprob) for j in range(call.start, len(ids))
        ]
        hit = int(getattr(out, "num_cached_tokens", 0) or 0)
        cached[call.request] += min(hit, call.start)
    return [
        ScoreResult(
            tuple(score(lps.get((ri, ci), [])) for ci in range(len(cs))),
            prompt_tokens=len(ids) * len(cs),
            prompt_tokens_reused=cached[ri],
        )
        for ri, (ids, cs) in enumerate(zip(prompt_ids, conts, strict=True))
    ]
