"""vLLM backend: ``vllm:ID_OR_PATH[?tp=2&pp=1&ray=1&dtype=bfloat16&adapter=DIR]``.

``LLM.generate`` on token-id prompts (``TokensPrompt``), tokenized here by the model's HF
tokenizer with ``add_special_tokens=False`` from the text ``userturn.chat`` renders, so
vLLM sees exactly the ids every other backend sees. Prefix caching is always on: an
item's user-turn prompt starts with its answer prompt, and k samples share one prompt.

Seeds: by default each sample is its own request with ``n=1, seed=<its seed>``, so a
sample is reproducible on its own and a resumed run regenerates exactly the missing
ones; prefix caching makes the k requests cost about what ``n=k`` does. ``?sampling=n``
sends one request with ``SamplingParams(n=k, seed=<first seed>)`` instead (samples are
then reproducible only as a set). Options: ``tp``, ``pp``, ``ray`` (force Ray; used
anyway when tp*pp exceeds the local GPUs, i.e. multi-node), ``dtype``,
``max_model_len``, ``gpu_memory_utilization``, ``tokenizer``, ``revision``,
``adapter`` (a LoRA folder), ``max_lora_rank``.

``loglikelihood`` sends prompt + continuation as one request with ``prompt_logprobs``
and reads the continuation's own token log-probabilities (raw logits: temperature 1, full
softmax), on an engine with prefix caching off (``score_engine_args``): a full prefill
per request, so scores never depend on request order. When a generation engine (caching
on) is up it is released first, one engine on the GPU at a time.

Request building is pure (``vllm_requests``: ``engine_args``, ``sampling_args``,
``plan_calls``, ``collect``, ``score_args``, ``plan_scores``, ``collect_scores``) and
unit-tested without vLLM; tests/gpu runs the real thing.
"""

from __future__ import annotations

import importlib.util
from functools import cached_property
from pathlib import Path
from typing import Any

from userturn import hfmodel
from userturn.backends.base import Backend, Capabilities
from userturn.backends.likelihood import continuation_ids
from userturn.backends.vllm_requests import (
    Call,
    ScoreCall,
    VLLMOptions,
    collect,
    collect_scores,
    engine_args,
    plan_calls,
    plan_scores,
    sampling_args,
    score_args,
    score_engine_args,
)
from userturn.errors import missing_extra
from userturn.spec import Spec
from userturn.types import GenRequest, GenResult, ScoreRequest, ScoreResult

__all__ = [
    "Call",
    "ScoreCall",
    "VLLMBackend",
    "VLLMOptions",
    "collect",
    "collect_scores",
    "engine_args",
    "plan_calls",
    "plan_scores",
    "sampling_args",
    "score_args",
    "score_engine_args",
]


class VLLMBackend(Backend):
    plugin = "vllm"
    Options = VLLMOptions
    options: VLLMOptions
    capabilities = Capabilities(
        raw_completion=True, n_samples=True, seeds=True, prefix_cache=True, loglikelihood=True
    )
    batch_items = 256

    def __init__(self, spec: Spec) -> None:
        super().__init__(spec)
        if not vllm_installed():
            raise missing_extra("vllm", "vllm")
        self.mode = self.options.sampling
        self.adapter = self.options.adapter
        name = Path(spec.target).name if Path(spec.target).exists() else spec.target
        self._model_id = f"vllm:{name}" + (f"+{Path(self.adapter).name}" if self.adapter else "")
        # Fail at config time on bad options, before any GPU work.
        self.args = engine_args(self.options, spec.target, local_gpus=_local_gpus())

    @property
    def model_id(self) -> str:
        return self._model_id

    @cached_property
    def revision(self) -> str:
        return self.options.revision or hfmodel.model_revision(self.spec.target, self.adapter)

    @cached_property
    def tokenizer(self) -> Any:
        return hfmodel.load_tokenizer(self.options.tokenizer or self.spec.target)

    @cached_property
    def llm(self) -> Any:
        self.__dict__.pop("score_llm", None)
        return self._engine(self.args)

    @cached_property
    def score_llm(self) -> Any:
        """The scoring engine: prefix caching off (see the module docstring)."""
        if not self.args.get("enable_prefix_caching"):
            return self.llm
        self.__dict__.pop("llm", None)
        return self._engine(score_engine_args(self.args))

    def _engine(self, args: dict[str, Any]) -> Any:
        import vllm

        model = hfmodel.resolve_source(self.spec.target)[0]
        if self.spec.target.endswith(".gguf"):
            model = self.spec.target  # vLLM reads GGUF files itself
        return vllm.LLM(**{**args, "model": model})

    def builtin_template(self) -> tuple[str, str, str, str]:
        return hfmodel.template_parts(self.tokenizer, self.spec.target)

    def tokenize(self, text: str) -> list[int]:
        ids: list[int] = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return ids

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        import vllm

        ids = [list(r.prompt_token_ids or self.tokenize(r.prompt)) for r in requests]
        calls = plan_calls(requests, ids, self.mode)
        outs = self.llm.generate(
            [{"prompt_token_ids": list(c.prompt_token_ids)} for c in calls],
            [vllm.SamplingParams(**c.sampling) for c in calls],
            **self._generate_kwargs(),
        )
        return collect(requests, calls, list(outs))

    def loglikelihood(self, requests: list[ScoreRequest]) -> list[ScoreResult]:
        import vllm

        prompt_ids = [self.tokenize(r.prompt) for r in requests]
        conts = [
            [
                continuation_ids(self.tokenize, self.tokenize, r.prompt, ids, c)
                for c in r.continuations
            ]
            for r, ids in zip(requests, prompt_ids, strict=True)
        ]
        calls = plan_scores(prompt_ids, conts)
        outs = []
        if calls:
            outs = self.score_llm.generate(
                [{"prompt_token_ids": list(c.prompt_token_ids)} for c in calls],
                [vllm.SamplingParams(**score_args()) for _ in calls],
                **self._generate_kwargs(),
            )
        return collect_scores(prompt_ids, conts, calls, list(outs))

    def _generate_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"use_tqdm": False}
        if self.adapter:
            from vllm.lora.request import LoRARequest

            kwargs["lora_request"] = LoRARequest(Path(self.adapter).name, 1, self.adapter)
        return kwargs

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "engine_args": self.args,
            "sampling_mode": self.mode,
            "adapter": self.adapter,
        }

    def close(self) -> None:
        self.__dict__.pop("llm", None)
        self.__dict__.pop("score_llm", None)


def vllm_installed() -> bool:
    """Checked at startup, without importing vLLM (seconds, and it grabs CUDA)."""
    return importlib.util.find_spec("vllm") is not None


def _local_gpus() -> int:
    try:
        import torch
    except ModuleNotFoundError:
        return 0
    return int(torch.cuda.device_count())
