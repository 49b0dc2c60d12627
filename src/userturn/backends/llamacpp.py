"""llama.cpp backend (the embedded default): llama-cpp-python on rendered text.

Why it is fast here: llama-cpp-python keeps one sequence in its KV cache and, on the next
call, re-evaluates only the tokens after the longest common prefix. The pipeline runs
each item's answer and then its user-turn prompts back to back (``batch_items = 1``),
and the user-turn prompt is almost always "answer prompt + answer + user header", so
nearly all of it is reused. We count the reused tokens ourselves from the cached ids, so
the figure is ours, not a log line.

With ``?batch_samples=on``, k samples of one prompt (k > 1, T > 0) are decoded together
(``llamacpp_batch``): one prompt pass, k KV sequences, one ``llama_decode`` per step, each
sample with its own seeded sampler. The text is the same as decoding them one after
another (the default, ``off``), so ``decode_key`` is empty in both modes. It is off by
default because its many-stream context makes every single-sequence decode (answers,
greedy turns) slower on a CPU: ``make run`` (k=2) took 5 min 29 s with it and 4 min 50 s
without on the same idle 2-core machine, while k=8 user turns gain 1.24x (P8).
``loglikelihood`` scores continuations in the prompt's KV prefix (``llamacpp_score``).

Spec: ``llamacpp:PATH.gguf`` or ``smollm2-135m``; options ``n_ctx`` (tokens per
sequence), ``n_threads``, ``batch_samples`` (``on``/``off``), ``n_seq`` (most samples
decoded together, default 4; each is ``n_ctx`` more KV cells, allocated at load).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from userturn import assets
from userturn.backends import llamacpp_batch as lb
from userturn.backends.base import Backend, Capabilities, ModelOptions
from userturn.backends.likelihood import continuation_ids
from userturn.backends.llamacpp_score import score_prompt
from userturn.errors import UserError, missing_extra
from userturn.spec import Spec
from userturn.types import (
    Completion,
    GenRequest,
    GenResult,
    SamplingParams,
    ScoreRequest,
    ScoreResult,
)

log = logging.getLogger(__name__)


def _llama_cpp() -> Any:
    return _import_llama()


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ModuleNotFoundError as exc:
        raise missing_extra("llamacpp", "llama-cpp-python") from exc
    return llama_cpp


@dataclass(frozen=True)
class LlamaCppOptions(ModelOptions):
    n_ctx: int = 4096
    n_threads: int | None = None
    """None: one per CPU."""
    batch_samples: bool = False
    n_seq: int = 4


class LlamaCppBackend(Backend):
    plugin = "llamacpp"
    Options = LlamaCppOptions
    options: LlamaCppOptions
    capabilities = Capabilities(
        raw_completion=True,
        n_samples=True,
        seeds=True,
        prefix_cache=True,
        loglikelihood=True,
        batched_samples=True,
    )
    batch_items = 1

    def __init__(self, spec: Spec) -> None:
        super().__init__(spec)
        if spec.target in assets.MODELS:  # a named model: fetched (once) when used
            self.path = assets.fetch_model(spec.target)
            self._model_id, self._revision = spec.target, assets.model_sha(spec.target)
        else:
            self.path = Path(spec.target)
            if not self.path.is_file():
                raise UserError("GGUF file not found", file=spec.target, field="model")
            self._model_id = self.path.stem
            self._revision = ""
        self.n_ctx = self.options.n_ctx
        self.n_threads = self.options.n_threads or os.cpu_count() or 1
        self.batch_samples = self.options.batch_samples
        self.n_seq = self.options.n_seq
        if not self.batch_samples:
            self.capabilities = replace(self.capabilities, batched_samples=False)
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
            try:
                return llama_cpp.Llama(model_path=str(self.path), vocab_only=True, verbose=False)
            except ValueError as exc:  # llama.cpp's reader refused the file
                raise self._unreadable() from exc

    def _unreadable(self) -> UserError:
        return UserError(
            "not a GGUF model llama.cpp can read (a text, truncated or damaged file?)",
            file=str(self.path),
            field="model",
        )

    def check_file(self) -> None:
        """Read the GGUF's metadata with llama.cpp's own reader (no weights; it also checks
        that every tensor lies within the file) and refuse an ``n_ctx`` over the model's
        training context, before minutes go into loading weights for a context it was
        never trained on."""
        meta = self._vocab.metadata
        arch = meta.get("general.architecture", "")
        trained = meta.get(f"{arch}.context_length")
        if trained is not None and trained.isdigit() and self.n_ctx > int(trained):
            raise UserError(
                f"n_ctx={self.n_ctx} is over the model's training context ({trained} tokens)",
                field="n_ctx",
            )

    @cached_property
    def llm(self) -> Any:
        llama_cpp = _import_llama()
        log.info("loading %s (n_ctx=%d, threads=%d)", self.path, self.n_ctx, self.n_threads)
        self.check_file()
        try:
            llm = llama_cpp.Llama(
                model_path=str(self.path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_batch=512,
                verbose=False,
            )
        except ValueError as exc:
            raise self._unreadable() from exc
        if self.batch_samples and self.n_seq > 1:
            lb.add_streams(llm, self.n_seq, self.n_ctx)
        return llm

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
        self._check_fits(len(tokens), req.params.max_tokens, "max_tokens")
        if self.batch_samples and len(req.seeds) > 1:
            completions, reused_total = self._together(tokens, req.params, req.seeds)
        else:
            completions, reused_total = [], 0
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

    def _check_fits(self, n_prompt: int, n_more: int, field: str) -> None:
        if n_prompt + n_more > self.n_ctx:
            raise UserError(
                f"prompt of {n_prompt} tokens + {field} {n_more} exceeds n_ctx {self.n_ctx}; "
                "raise ?n_ctx= or lower the token budget",
                field=field,
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
        sample = lb.Sample(params.stop, params.max_tokens)
        gen = llm.generate(
            tokens,
            top_k=params.top_k,
            top_p=params.top_p,
            min_p=0.0,
            temp=params.temperature,
            repeat_penalty=1.0,
        )
        for token in gen:
            eog = bool(_llama_cpp().llama_vocab_is_eog(llm._model.vocab, token))
            if sample.push(token, eog, self._detokenize):
                break
        gen.close()
        return sample.completion()

    def _detokenize(self, ids: list[int]) -> str:
        return str(self.llm.detokenize(ids, special=True).decode("utf-8", errors="replace"))

    def _together(
        self, tokens: list[int], params: SamplingParams, seeds: tuple[int | None, ...]
    ) -> tuple[list[Completion], int]:
        """The samples of one prompt decoded as one batch, in groups of at most ``n_seq``.

        Returns the completions in seed order and the prompt tokens taken from the cache,
        counted as in sequential decoding: the group's first sample reuses the cached
        prefix, each other one all but the prompt's last token (re-evaluated for it).
        """
        group = min(len(seeds), lb.streams(self.llm))
        out: list[Completion] = []
        reused = 0
        for at in range(0, len(seeds), group):
            chunk = seeds[at : at + group]
            reused += lb.eval_prompt(self.llm, tokens) + (len(chunk) - 1) * (len(tokens) - 1)
            out += [s.completion() for s in lb.decode_group(self.llm, tokens, params, chunk)]
        return out, reused

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

    def loglikelihood(self, requests: list[ScoreRequest]) -> list[ScoreResult]:
        """Each request's prompt is evaluated once (reusing the cached prefix); each
        continuation is scored in its KV prefix (``llamacpp_score``)."""
        return [self._score(req) for req in requests]

    def _score(self, req: ScoreRequest) -> ScoreResult:
        prompt_ids = self.tokenize(req.prompt)
        conts = [
            continuation_ids(self.tokenize, self._piece, req.prompt, prompt_ids, c)
            for c in req.continuations
        ]
        self._check_fits(len(prompt_ids), max(map(len, conts), default=0), "continuation")
        return score_prompt(self.llm, prompt_ids, conts)

    def _piece(self, text: str) -> list[int]:
        ids: list[int] = self._vocab.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        return ids

    def close(self) -> None:
        if "llm" in self.__dict__:
            self.llm.close()
            del self.__dict__["llm"]
