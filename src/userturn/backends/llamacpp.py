"""llama.cpp backend (the embedded default): llama-cpp-python on rendered text.

Why it is fast here: llama-cpp-python keeps one sequence in its KV cache and, on the next
call, re-evaluates only the tokens after the longest common prefix. The pipeline runs
each item's answer and then its user-turn prompts back to back (``batch_items = 1``),
and the user-turn prompt is almost always "answer prompt + answer + user header", so
nearly all of it is reused; k samples of one prompt share it too. We count the reused
tokens ourselves from the cached ids, so the figure is ours, not a log line.

Spec: ``llamacpp:PATH.gguf`` or ``smollm2-135m``; options ``n_ctx``, ``n_threads``.
"""

from __future__ import annotations

import logging
import os
from functools import cached_property
from pathlib import Path
from typing import Any

from userturn import assets
from userturn.backends.base import Backend, Capabilities
from userturn.errors import UserError, missing_extra
from userturn.spec import Spec
from userturn.types import Completion, Finish, GenRequest, GenResult, SamplingParams

log = logging.getLogger(__name__)


def _first_stop(text: str, stops: tuple[str, ...]) -> int | None:
    hits = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return min(hits) if hits else None


def _llama_cpp() -> Any:
    return _import_llama()


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ModuleNotFoundError as exc:
        raise missing_extra("llamacpp", "llama-cpp-python") from exc
    return llama_cpp


class LlamaCppBackend(Backend):
    capabilities = Capabilities(raw_completion=True, n_samples=True, seeds=True, prefix_cache=True)
    batch_items = 1

    def __init__(self, spec: Spec) -> None:
        super().__init__(spec)
        if spec.target == "smollm2-135m":
            self.path = assets.fetch(assets.SMOLLM2)
            self._model_id = "smollm2-135m"
            self._revision = assets.SMOLLM2.sha256 or ""
        elif spec.target == "qwen2.5-coder-0.5b":  # opt-in: fetched only when named
            from userturn import assets_qwen

            self.path = assets_qwen.fetch_multipart(assets_qwen.QWEN25_CODER_05B)
            self._model_id, self._revision = spec.target, assets_qwen.QWEN25_CODER_05B.sha256
        else:
            self.path = Path(spec.target)
            if not self.path.is_file():
                raise UserError("GGUF file not found", file=spec.target, field="model")
            self._model_id = self.path.stem
            self._revision = ""
        self.n_ctx = int(spec.option("n_ctx", "4096") or 4096)
        self.n_threads = int(spec.option("n_threads") or os.cpu_count() or 1)
        self.stats = {"prompt_tokens": 0, "prompt_tokens_reused": 0, "calls": 0}

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def revision(self) -> str:
        if not self._revision:
            self._revision = assets.file_sha256(self.path)
        return self._revision

    @cached_property
    def _vocab(self) -> Any:
        """A vocab-only load: metadata and tokenizer in milliseconds, no weights."""
        llama_cpp = _import_llama()
        from llama_cpp._utils import suppress_stdout_stderr

        with suppress_stdout_stderr(disable=False):  # C-level warnings about n_ctx
            return llama_cpp.Llama(model_path=str(self.path), vocab_only=True, verbose=False)

    @cached_property
    def llm(self) -> Any:
        llama_cpp = _import_llama()
        log.info("loading %s (n_ctx=%d, threads=%d)", self.path, self.n_ctx, self.n_threads)
        return llama_cpp.Llama(
            model_path=str(self.path),
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            n_batch=512,
            verbose=False,
        )

    @cached_property
    def runtime_adds_bos(self) -> bool:  # type: ignore[override]
        """Whether llama.cpp prepends BOS when it tokenizes a prompt string.

        Asked of llama.cpp itself rather than read from ``tokenizer.ggml.add_bos_token``:
        when that key is absent, llama.cpp's default depends on the vocab type (Llama-3
        BPE adds BOS; SmolLM2 and Qwen don't).
        """
        ids = self._vocab.tokenize(b"a", add_bos=True, special=False)
        return bool(ids) and ids[0] == self._vocab.token_bos()

    def _token_text(self, key: str) -> str:
        tid = self._vocab.metadata.get(key)
        if tid is None:
            return ""
        piece: bytes = self._vocab.detokenize([int(tid)], special=True)
        return piece.decode("utf-8", errors="replace")

    def builtin_template(self) -> tuple[str, str, str, str]:
        source = str(self._vocab.metadata.get("tokenizer.chat_template") or "")
        return (
            source,
            f"{self.path}#tokenizer.chat_template",
            self._token_text("tokenizer.ggml.bos_token_id"),
            self._token_text("tokenizer.ggml.eos_token_id"),
        )

    def tokenize(self, text: str) -> list[int]:
        ids: list[int] = self._vocab.tokenize(
            text.encode("utf-8"), add_bos=self.runtime_adds_bos, special=True
        )
        return ids

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        return [self._one(req) for req in requests]

    def _one(self, req: GenRequest) -> GenResult:
        tokens = list(req.prompt_token_ids or self.tokenize(req.prompt))
        if len(tokens) + req.params.max_tokens > self.n_ctx:
            raise UserError(
                f"prompt of {len(tokens)} tokens + max_tokens "
                f"{req.params.max_tokens} exceeds n_ctx {self.n_ctx}; "
                "raise ?n_ctx= or lower the token budget",
                field="max_tokens",
            )
        completions = []
        reused_total = 0
        for seed in req.seeds:
            reused_total += self._reusable(tokens)
            completions.append(self._sample(tokens, req.params, seed))
        n = len(req.seeds)
        self.stats["calls"] += n
        self.stats["prompt_tokens"] += len(tokens) * n
        self.stats["prompt_tokens_reused"] += reused_total
        return GenResult(
            tuple(completions), prompt_tokens=len(tokens) * n, prompt_tokens_reused=reused_total
        )

    def _sample(self, tokens: list[int], params: SamplingParams, seed: int | None) -> Completion:
        """One raw sample, detokenized *with* special tokens.

        ``create_completion`` drops special tokens from its text, so a generated
        ``<|im_start|>`` would be invisible to the judge and a stop string that starts
        with one could never match. We drive ``Llama.generate`` ourselves (it keeps the
        native longest-prefix KV reuse) and match stops on the special-inclusive text.
        """
        llm = self.llm
        if seed is not None:
            llm.set_seed(seed)
        out: list[int] = []
        text = ""
        finish: Finish = "length"
        gen = llm.generate(
            tokens,
            top_k=params.top_k,
            top_p=params.top_p,
            min_p=0.0,
            temp=params.temperature,
            repeat_penalty=1.0,
        )
        for token in gen:
            if _llama_cpp().llama_vocab_is_eog(llm._model.vocab, token):
                finish = "stop"
                break
            out.append(token)
            text = llm.detokenize(out, special=True).decode("utf-8", errors="replace")
            cut = _first_stop(text, params.stop)
            if cut is not None:
                text, finish = text[:cut], "stop"
                break
            if len(out) >= params.max_tokens:
                break
        gen.close()
        return Completion(text=text, finish=finish, completion_tokens=len(out))

    def _reusable(self, tokens: list[int]) -> int:
        """Tokens llama-cpp-python will take from its KV cache for this prompt.

        It matches the cached ids against ``tokens[:-1]`` (the last prompt token is
        always re-evaluated to get fresh logits).
        """
        cached = self.llm._input_ids[: self.llm.n_tokens]
        n = 0
        for a, b in zip(cached, tokens[:-1], strict=False):
            if a != b:
                break
            n += 1
        return n

    def close(self) -> None:
        if "llm" in self.__dict__:
            self.llm.close()
            del self.__dict__["llm"]
