"""The one narrow, batched backend protocol every engine implements.

``generate(requests) -> results`` in input order, with all sampling options in one
``SamplingParams`` (vLLM's shape). Rendering is not a backend's job: every backend gets
the same prompt text from ``userturn.chat``, which is what makes runs comparable across
engines. A backend that cannot write a raw user turn must fail at startup and say why.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from userturn.chat import ChatTemplate
from userturn.errors import UserError
from userturn.spec import Spec
from userturn.types import GenRequest, GenResult, ScoreRequest, ScoreResult


@dataclass(frozen=True)
class ModelOptions:
    """A model spec's ``?key=value`` options, typed. Each backend subclasses it with one
    field per option the registry lists for it, so what validates is what it reads."""

    family: str | None = None


@dataclass(frozen=True)
class Capabilities:
    raw_completion: bool = True
    n_samples: bool = True
    seeds: bool = True
    prefix_cache: bool = False
    loglikelihood: bool = False
    """``loglikelihood`` scores continuations (full-softmax token log-probabilities)."""
    batched_samples: bool = False
    """The k samples of one prompt are decoded together (one prompt pass, one batch)."""


@dataclass(frozen=True)
class TemplateOptions:
    """How the run wants the template: an override file, special tokens, frozen date."""

    date: dt.date
    path: str | None = None
    bos_token: str | None = None
    eos_token: str | None = None


FAMILIES = (
    "qwen",
    "gpt-oss",
    "glm",
    "llama",
    "gemma",
    "smollm",
    "mistral",
    "deepseek",
    "phi",
    "olmo",
)


def family_of(model_id: str) -> str:
    """The model family for summaries and tables, from the model id."""
    low = model_id.lower().replace("_", "-")
    for fam in FAMILIES:
        if fam in low:
            return fam
    return "other"


class Backend(ABC):
    """A loaded model (or a client for one). Subclasses stay small."""

    capabilities = Capabilities()
    batch_items: int = 64
    """Items the pipeline processes per chunk. llama.cpp keeps one sequence in its KV
    cache, so it uses 1: each item's user-turn prompt then extends its own answer."""

    plugin: ClassVar[str] = ""
    """The backend's name in ``registry.MODELS``, whose option schema ``Options`` follows."""
    Options: ClassVar[type[ModelOptions]] = ModelOptions

    def __init__(self, spec: Spec) -> None:
        from userturn import registry

        self.spec = spec
        self.options = registry.MODELS[self.plugin].typed(self.Options, spec.options)

    @property
    @abstractmethod
    def model_id(self) -> str:
        """Stable name for records and cells (e.g. ``smollm2-135m``)."""

    @property
    def revision(self) -> str:
        """File SHA or hub revision, part of every record key."""
        return ""

    @property
    def decode_key(self) -> str:
        """How samples are decoded, when that changes the text (e.g. batched vs
        sequential k-sample decoding); part of every user-turn key. "" by default."""
        return ""

    @property
    def family(self) -> str:
        return self.options.family or family_of(self.model_id)

    @property
    def runtime_adds_bos(self) -> bool:
        return False

    @abstractmethod
    def builtin_template(self) -> tuple[str, str, str, str]:
        """(template source or "" if the model has none, where it came from, bos text,
        eos text) from the model's own files."""

    def template(self, opts: TemplateOptions) -> ChatTemplate:
        """The model's own template, or ``--chat-template FILE`` with token overrides."""
        source, name, bos, eos = self.builtin_template()
        if opts.path:
            path = Path(opts.path)
            if not path.is_file():
                raise UserError("chat template file not found", file=opts.path)
            source, name = path.read_text(encoding="utf-8"), str(path)
        if not source:
            raise UserError(
                "the model has no chat template; pass --chat-template FILE "
                "(runtimes silently fall back to a generic format)",
                file=name,
            )
        return ChatTemplate(
            source=source,
            name=name,
            bos_token=bos if opts.bos_token is None else opts.bos_token,
            eos_token=eos if opts.eos_token is None else opts.eos_token,
            date=opts.date,
            runtime_adds_bos=self.runtime_adds_bos,
        )

    def tokenize(self, text: str) -> list[int] | None:
        """Token ids as the runtime will see them (no added BOS handling here)."""
        return None

    @abstractmethod
    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        """Generate for each request, in input order; ``len(seeds)`` samples each."""

    def loglikelihood(self, requests: list[ScoreRequest]) -> list[ScoreResult]:
        """Score each request's continuations given its prompt, in input order.

        Backends that can read token log-probabilities override this; the rest refuse
        with one line, so ``userturn likelihood`` fails at startup, not mid-run.
        """
        raise UserError(
            f"backend {self.spec.kind or self.model_id!r} cannot score continuations "
            "(log-likelihood); use llamacpp, hf, vllm or an openai server with echo+logprobs",
            field="model",
        )

    def describe(self) -> dict[str, object]:
        """For the manifest: what this backend is and what it honours."""
        caps = self.capabilities
        return {
            "spec": self.spec.raw,
            "model_id": self.model_id,
            "revision": self.revision,
            "family": self.family,
            "capabilities": caps.__dict__,
        }

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release engines, clients and threads."""
