"""OpenAI-compatible server as the model under test (``openai:MODEL``).

Why ``/v1/completions`` and a local template: a chat endpoint can only write assistant
turns, so the user-turn prompt is rendered here, by the same chat module as every other
backend, and sent as raw text. That needs the model's template: ``--chat-template FILE``,
or ``?tokenizer=HF_ID_OR_PATH`` (its ``chat_template``; a local folder or a ``.gguf``
file works offline).
Answers go to ``/v1/completions`` too, so both stages see exactly the prompts the other
backends see.

- **Startup.** The first thing that needs the server asks ``/v1/models`` once: a dead
  server stops the run there with one line ("cannot reach URL: connection refused").
- **Identity.** ``revision`` is a fingerprint of the base URL, the served name and the
  server's ``/v1/models`` entry, so results from another server or another checkpoint
  served under the same name are never reused.
- **Tokens.** ``tokenize`` asks the server (llama-cpp-python ``/extras/tokenize``, vLLM
  ``/tokenize``, llama.cpp ``/tokenize``), so prompts can be checked at token level. Whether
  the server adds BOS is probed the same way (tokenize the empty string), since only then
  may a rendered BOS text be stripped (``?add_bos=true|false`` overrides).
- **Special tokens.** vLLM and SGLang drop special tokens from the text they return, so a
  stop like ``<|assistant|>`` (GLM) or ``<|end|>`` (gpt-oss) would never match and a user
  turn would run into the next assistant turn. We send ``skip_special_tokens: false`` and
  ``spaces_between_special_tokens: false``; a server that refuses them (naming them in a
  400) is found with its first request and not sent them again.
- **Sampling.** llama.cpp's server defaults to ``repeat_penalty=1.1``, ``min_p=0.05``,
  ``top_k=40``; unless the host is api.openai.com we send neutral values (and ``top_k``),
  so a served model samples like the in-process one. One request per sample, each with
  its own seed.
- **Log-likelihood** needs ``echo`` with ``logprobs`` on ``/v1/completions`` (vLLM,
  llama-cpp-python); see ``loglikelihood``.
- **Failures** after the client's bounded retries stop the run with a ``UserError``: an
  empty completion would be judged as a degenerate turn, a silently defaulted verdict.
  The store keeps everything finished, so rerunning resumes.

Options: ``base_url``, ``api_key_env``, ``tokenizer``, ``add_bos``, ``family``, and the
client's ``concurrency``, ``timeout``, ``max_retries``, ``rate_limit_retries``,
``backoff``, ``price_in``/``price_out``.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from userturn.backends.base import Backend, Capabilities, ModelOptions, TemplateOptions
from userturn.chat import ChatTemplate
from userturn.errors import UserError, missing_extra
from userturn.http import (
    CallResult,
    FinalIf,
    HTTPOptions,
    OpenAIClient,
    ShapeDetector,
    refuses,
    warn_once,
)
from userturn.spec import Spec
from userturn.types import (
    Completion,
    ContinuationScore,
    Finish,
    GenRequest,
    GenResult,
    ScoreRequest,
    ScoreResult,
)

log = logging.getLogger(__name__)

NEUTRAL = {"repeat_penalty": 1.0, "repetition_penalty": 1.0, "min_p": 0.0}
SPECIAL = {"skip_special_tokens": False, "spaces_between_special_tokens": False}
TOKENIZE_ROUTES = ("/extras/tokenize", "/tokenize")
ECHO = {"echo": True, "logprobs": 1, "max_tokens": 1, "temperature": 0.0}
"""Score by echoing the text: one greedy token is generated (``max_tokens=0`` means
"unlimited" on llama-cpp-python) and left out by its offset."""
GREEDY_TOLERANCE = 1e-3


@dataclass(frozen=True)
class CompletionShape:
    """Which optional field groups this server takes on ``/v1/completions``."""

    special_tokens: bool = True
    neutral: bool = True


def adapt_completion(shape: CompletionShape, failure: CallResult) -> CompletionShape | None:
    """The shape without the field group a refusal names, or None if it names none."""
    if shape.special_tokens and any(refuses(failure, f) for f in SPECIAL):
        return replace(shape, special_tokens=False)
    if shape.neutral and any(refuses(failure, f) for f in (*NEUTRAL, "top_k")):
        return replace(shape, neutral=False)
    return None


def completion_body(
    shape: CompletionShape, fields: dict[str, Any], top_k: int = 0
) -> dict[str, Any]:
    """The request's keyword arguments: ``fields`` plus the optional groups ``shape`` allows
    (in ``extra_body``, since they are not OpenAI parameters)."""
    extra: dict[str, Any] = {}
    if shape.neutral:
        extra |= {**NEUTRAL, "top_k": top_k}
    if shape.special_tokens:
        extra |= SPECIAL
    return {**fields, "extra_body": extra} if extra else dict(fields)


@dataclass(frozen=True)
class Echo:
    """An echoed text's tokens: where each starts, and its log-probability.

    Offsets are in the server's own text: vLLM's index the echoed string, but
    llama-cpp-python's count its detokenization without special tokens.
    """

    tokens: tuple[str, ...]
    offsets: tuple[int, ...]
    logprobs: tuple[float | None, ...]
    generated: int
    """Trailing entries the server generated after the text (0 or 1)."""
    text: str
    prompt_tokens: int = 0

    def offsets_index_text(self) -> bool:
        """Whether every token sits at its offset in the echoed text."""
        return all(
            self.text.startswith(t, o) for t, o in zip(self.tokens, self.offsets, strict=True) if t
        )

    def text_end(self) -> int:
        """Where the sent text ends, in the server's offsets."""
        n = len(self.tokens) - self.generated
        if self.generated:
            return self.offsets[n]
        return self.offsets[n - 1] + len(self.tokens[n - 1]) if n else 0


def read_echo(response: dict[str, Any], sent: str, where: str) -> Echo:
    """The echo in a ``/v1/completions`` reply, checked; a ``UserError`` if unusable.

    The check that matters: at T=0 the generated token is the greedy one, so its
    log-probability must be the top of its distribution. A server that shifts
    log-probabilities by one position (llama-cpp-python on a prompt without BOS) fails
    it, instead of returning scores of the wrong tokens.
    """
    choice = response["choices"][0]
    lp = choice.get("logprobs") or {}
    tokens, values = lp.get("tokens"), lp.get("token_logprobs")
    text = str(choice.get("text") or "")
    if not (isinstance(tokens, list) and isinstance(values, list) and tokens) or len(tokens) != len(
        values
    ):
        raise UserError(f"{where} returns no echo log-probabilities", field="model")
    if not text.startswith(sent):
        raise UserError(f"{where} ignores echo (the reply does not repeat the text)", field="model")
    offsets = lp.get("text_offset")
    if not (isinstance(offsets, list) and len(offsets) == len(tokens)):
        offsets = [sum(len(str(t)) for t in tokens[:i]) for i in range(len(tokens))]
    usage = response.get("usage") or {}
    done = usage.get("completion_tokens")
    generated = (
        min(1, int(done)) if done is not None else int(choice.get("finish_reason") == "length")
    )
    _check_greedy(lp.get("top_logprobs"), values, generated, where)
    return Echo(
        tuple(str(t) for t in tokens),
        tuple(int(o) for o in offsets),
        tuple(None if v is None else float(v) for v in values),
        generated,
        text,
        int(usage.get("prompt_tokens") or 0),
    )


def _check_greedy(top: Any, values: list[Any], generated: int, where: str) -> None:
    if not (generated and isinstance(top, list) and top and isinstance(top[-1], dict)):
        return
    best = max((float(v) for v in top[-1].values()), default=None)
    if best is not None and values[-1] is not None and float(values[-1]) < best - GREEDY_TOLERANCE:
        raise UserError(
            f"{where} returns misaligned echo log-probabilities (the greedy token is not "
            "the most likely one; llama-cpp-python does this when the prompt doesn't start "
            "with BOS), so it cannot score continuations",
            field="model",
        )


def continuation_score(full: Echo, start: int, end: int | None = None) -> ContinuationScore:
    """Sum over the tokens that start at or after ``start`` (and before ``end``): a token
    that straddles the prompt's end belongs to the prompt. The generated token is out."""
    last = len(full.tokens) - (full.generated if end is None else 0)
    picked = [
        full.logprobs[i]
        for i in range(last)
        if full.offsets[i] >= start and (end is None or full.offsets[i] < end)
    ]
    values = tuple(v for v in picked if v is not None)
    if len(values) != len(picked):
        raise UserError("a continuation token has no log-probability (empty prompt?)")
    return ContinuationScore(sum(values), len(values), values)


@dataclass(frozen=True)
class OpenAIOptions(ModelOptions, HTTPOptions):
    tokenizer: str | None = None
    """HF id, folder or .gguf holding the chat template (and the tokenizer)."""
    add_bos: bool | None = None
    """None: asked of the server's tokenize route, else of ``tokenizer``."""


class OpenAIBackend(Backend):
    plugin = "openai"
    Options = OpenAIOptions
    options: OpenAIOptions
    capabilities = Capabilities(raw_completion=True, n_samples=True, seeds=True, prefix_cache=False)
    batch_items = 256
    """Large chunks: the client runs a chunk's requests concurrently."""

    def __init__(self, spec: Spec, base_url: str | None = None) -> None:
        super().__init__(spec)
        if not spec.target:
            raise UserError("openai backend needs a model name: openai:MODEL", field="model")
        self.client = OpenAIClient(spec.target, self.options, base_url)
        hosted = (urlparse(self.client.server).hostname or "").endswith("openai.com")
        self.neutral_sampling = not hosted
        self.shapes = ShapeDetector(
            ("completions", self.client.server, self.client.model),
            CompletionShape(special_tokens=not hosted, neutral=not hosted),
            adapt_completion,
        )
        self._tokenize_route: str | None = None
        self._echo_lock = threading.Lock()
        self._echo_checked = False

    @property
    def model_id(self) -> str:
        return self.spec.target

    @cached_property
    def revision(self) -> str:
        """``server:<hash>`` of (base URL, served name, ``/v1/models`` entry)."""
        return f"server:{self.client.fingerprint()}"

    def describe(self) -> dict[str, object]:
        return {
            **super().describe(),
            "server": {**self.client.describe(), "models_entry": self.client.server_entry()},
            "capabilities_note": "seeds are honoured only if the server does",
        }

    # template -------------------------------------------------------------------------
    def template(self, opts: TemplateOptions) -> ChatTemplate:
        if not opts.path and not self.options.tokenizer:
            raise UserError(
                "openai:MODEL needs the model's chat template to write user turns: a chat "
                "endpoint can only write assistant turns, so userturn renders the prompt "
                "itself and sends it to /v1/completions. Pass --chat-template FILE or "
                "?tokenizer=HF_ID_OR_PATH",
                field="model",
            )
        return super().template(opts)

    @cached_property
    def _hf_tokenizer(self) -> Any:
        name = str(self.options.tokenizer)
        try:
            from transformers import AutoTokenizer
        except ModuleNotFoundError as exc:
            raise missing_extra("hf", "transformers") from exc
        path = Path(name)
        try:
            if path.suffix == ".gguf" and path.is_file():  # offline: a GGUF's own tokenizer
                return AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            return AutoTokenizer.from_pretrained(name)
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot load tokenizer {name!r}: {exc}", field="tokenizer") from exc

    def builtin_template(self) -> tuple[str, str, str, str]:
        """The ``?tokenizer=``'s template and special tokens ("" when there is none)."""
        if not self.options.tokenizer:
            return "", f"openai:{self.model_id}", "", ""
        tok = self._hf_tokenizer
        source = tok.chat_template
        if isinstance(source, dict):
            source = source.get("default")
        return (
            str(source or ""),
            f"{self.options.tokenizer}#chat_template",
            str(tok.bos_token or ""),
            str(tok.eos_token or ""),
        )

    @cached_property
    def runtime_adds_bos(self) -> bool:
        self.client.server_entry()  # a dead server fails here, before any warning
        if self.options.add_bos is not None:
            return self.options.add_bos
        empty = self.tokenize("")
        if empty is not None:
            return len(empty) > 0
        if self.options.tokenizer:
            return len(self._hf_tokenizer("")["input_ids"]) > 0
        warn_once(
            log,
            ("bos-unknown", self.client.server),
            "%s: cannot tell whether the server adds BOS (no tokenize endpoint, no "
            "?tokenizer=); assuming it doesn't. Set ?add_bos= to be sure.",
            self.client.server,
        )
        return False

    # tokens ---------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int] | None:
        """Token ids as the server will see them, or None if it has no tokenize route."""
        self.client.server_entry()
        routes = [self._tokenize_route] if self._tokenize_route else list(TOKENIZE_ROUTES)
        body = {
            "input": text,
            "prompt": text,
            "content": text,
            "model": self.model_id,
            "add_special_tokens": True,
            "add_special": True,
            "parse_special": True,
        }
        for route in routes:
            if route is None:
                continue
            reply = self.client.post_json(route, body)
            if isinstance(reply, dict) and isinstance(reply.get("tokens"), list):
                self._tokenize_route = route
                return [int(t) for t in reply["tokens"]]
        return None

    # requests -------------------------------------------------------------------------
    def _complete(
        self, fields: dict[str, Any], top_k: int = 0, also_final: FinalIf | None = None
    ) -> CallResult:
        """One ``/v1/completions`` request in the shape this server takes."""

        def send(shape: CompletionShape, final_if: FinalIf) -> CallResult:
            stop_early = final_if if also_final is None else _either(final_if, also_final)
            body = completion_body(shape, fields, top_k)
            return self.client.request("completions", final_if=stop_early, **body)

        res = self.shapes.call(send)
        shape = self.shapes.shape
        if self.neutral_sampling and shape is not None and not shape.neutral:
            warn_once(
                log,
                ("no-neutral-sampling", self.client.server),
                "%s refuses repeat_penalty/min_p/top_k: it samples with its own defaults, "
                "so its outputs may differ from an in-process backend's",
                self.client.server,
            )
        return res

    # generation -----------------------------------------------------------------------
    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        self.client.server_entry()
        jobs = [(i, seed) for i, req in enumerate(requests) for seed in req.seeds]
        done = self.client.map(lambda job: self._one(requests[job[0]], job[1]), jobs)
        per_req: dict[int, list[tuple[Completion, int]]] = {}
        for (i, _), result in zip(jobs, done, strict=True):
            per_req.setdefault(i, []).append(result)
        out = []
        for i in range(len(requests)):
            got = per_req.get(i, [])
            out.append(GenResult(tuple(c for c, _ in got), prompt_tokens=sum(p for _, p in got)))
        return out

    @staticmethod
    def _fields(req: GenRequest, seed: int | None) -> dict[str, Any]:
        p = req.params
        fields: dict[str, Any] = {
            "prompt": req.prompt,
            "max_tokens": p.max_tokens,
            "temperature": p.temperature,
            "top_p": p.top_p,
        }
        if p.stop:
            fields["stop"] = list(p.stop)
        if seed is not None:
            fields["seed"] = seed
        return fields

    def _payload(
        self, req: GenRequest, seed: int | None, shape: CompletionShape | None = None
    ) -> dict[str, Any]:
        """The request body for one sample (pure), in ``shape`` or the detected one."""
        shape = shape or self.shapes.shape or self.shapes.start
        return completion_body(shape, self._fields(req, seed), req.params.top_k)

    def _one(self, req: GenRequest, seed: int | None) -> tuple[Completion, int]:
        res = self._complete(self._fields(req, seed), req.params.top_k)
        if not res.ok:
            raise UserError(
                f"{self.client.server}: {req.role} completion failed after "
                f"{res.attempts} attempts ({res.error} {res.body[:200]}); "
                "finished work is stored, rerun to resume",
                field="model",
            )
        assert res.response is not None
        choice = res.response["choices"][0]
        finish: Finish = "length" if choice.get("finish_reason") == "length" else "stop"
        return (
            Completion(
                text=str(choice.get("text") or ""),
                finish=finish,
                completion_tokens=int(res.usage.get("completion_tokens", 0)),
            ),
            int(res.usage.get("prompt_tokens", 0)),
        )

    # log-likelihood -------------------------------------------------------------------
    def loglikelihood(self, requests: list[ScoreRequest]) -> list[ScoreResult]:
        """Score continuations with ``echo`` + ``logprobs`` on ``/v1/completions``.

        Each prompt+continuation is echoed; the continuation's tokens are those whose
        offsets start at or after the prompt's end. Where offsets index the echoed text
        (vLLM, SGLang) that end is ``len(prompt)``. Where they don't (llama-cpp-python
        leaves special tokens out of its offsets), the prompt alone is echoed once to
        measure its end in the server's own offsets. The first request is the capability
        check: a server without echo+logprobs stops the run there with one line.
        """
        self.client.server_entry()
        texts = [(i, r.prompt + c) for i, r in enumerate(requests) for c in r.continuations]
        per_req: dict[int, list[Echo]] = {i: [] for i in range(len(requests))}
        for (i, _), echo in zip(texts, self._echo_all([t for _, t in texts]), strict=True):
            per_req[i].append(echo)
        measure = [i for i, got in per_req.items() if not all(e.offsets_index_text() for e in got)]
        prompts = self._echo_all([requests[i].prompt for i in measure])
        measured = dict(zip(measure, prompts, strict=True))
        return [self._scores(r, per_req[i], measured.get(i)) for i, r in enumerate(requests)]

    def _echo_all(self, texts: list[str]) -> list[Echo]:
        """Each text echoed, in order; the first one this backend ever sends goes alone,
        as the capability check."""
        with self._echo_lock:
            first = [self._echo(texts[0])] if texts and not self._echo_checked else []
            self._echo_checked = self._echo_checked or bool(texts)
        return first + self.client.map(self._echo, texts[len(first) :])

    def _scores(
        self, req: ScoreRequest, fulls: list[Echo], prompt_echo: Echo | None
    ) -> ScoreResult:
        if prompt_echo is None:  # offsets index the text itself
            start = len(req.prompt)
            scores = [
                continuation_score(e, start, start + len(c))
                for e, c in zip(fulls, req.continuations, strict=True)
            ]
            evaluated = 0
        else:
            scores = [continuation_score(e, prompt_echo.text_end()) for e in fulls]
            evaluated = prompt_echo.prompt_tokens
        evaluated += sum(e.prompt_tokens for e in fulls)
        return ScoreResult(tuple(scores), prompt_tokens=evaluated)

    def _echo(self, text: str) -> Echo:
        where = f"{self.client.url} ({self.model_id})"

        def refuses_echo(failure: CallResult) -> bool:
            return refuses(failure, "echo") or refuses(failure, "logprobs")

        res = self._complete({"prompt": text, **ECHO}, also_final=refuses_echo)
        if not res.ok:
            why = "refuses echo+logprobs" if refuses_echo(res) else "failed"
            raise UserError(
                f"{where} {why} on /v1/completions ({res.error} {res.body[:160]}); "
                "log-likelihood scoring needs a server that returns echo log-probabilities",
                field="model",
            )
        assert res.response is not None
        return read_echo(res.response, text, where)

    def close(self) -> None:
        self.client.close()


def _either(a: FinalIf, b: FinalIf) -> FinalIf:
    return lambda failure: a(failure) or b(failure)
