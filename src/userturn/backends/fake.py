"""``fake:NAME[?script=FILE]``: a deterministic, scripted backend for fast tests.

Why: the worker and the driver deserve unit tests that run in milliseconds and can
check what the probe *asks* for (``role="user"`` for user turns, one seed per sample,
the sample/seed plan), which a real model can't show. It renders with a real ChatML
template (the same rendering code as every backend) and records every request it gets
in ``REQUESTS[NAME]``; the real-model tests stay beside these.

Replies: with ``?script=FILE`` (JSON ``{"assistant": [...], "user": [...]}``), each entry
is a text or ``{"match": "substring of the prompt", "text": "..."}``; the first entry
whose ``match`` occurs in the prompt wins, else a plain text is picked by a hash of
(prompt, seed), so the same request always gets the same reply. Without a script,
answers are "The answer is 42." and user turns "Why is it 42? (seed S)". ``{seed}`` in a
reply becomes the sample's seed; any other braces stay as written. A reply longer
than ``max_tokens`` words is cut there with finish ``length``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from userturn.backends.base import Backend, Capabilities, ModelOptions
from userturn.errors import UserError, read_text
from userturn.spec import Spec
from userturn.types import (
    Completion,
    ContinuationScore,
    GenRequest,
    GenResult,
    ScoreRequest,
    ScoreResult,
)

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
DEFAULTS: dict[str, list[Any]] = {
    "assistant": ["The answer is 42."],
    "user": ["Why is it 42? (seed {seed})"],
}
REQUESTS: dict[str, list[GenRequest]] = {}
"""Every request each fake model received, by model name (tests read it)."""


@dataclass(frozen=True)
class FakeOptions(ModelOptions):
    script: str | None = None
    """A JSON file of scripted replies; None: the defaults."""


class FakeBackend(Backend):
    plugin = "fake"
    Options = FakeOptions
    options: FakeOptions
    capabilities = Capabilities(raw_completion=True, n_samples=True, seeds=True)
    batch_items = 4

    def __init__(self, spec: Spec) -> None:
        super().__init__(spec)
        self.name = spec.target or "fake"
        self.script = _load_script(self.options.script)
        REQUESTS.setdefault(self.name, [])

    @property
    def model_id(self) -> str:
        return f"fake:{self.name}"

    def builtin_template(self) -> tuple[str, str, str, str]:
        return CHATML, "fake#chatml", "", "<|im_end|>"

    def generate(self, requests: list[GenRequest]) -> list[GenResult]:
        REQUESTS[self.name].extend(requests)
        return [self._one(r) for r in requests]

    def _one(self, req: GenRequest) -> GenResult:
        comps = tuple(self._reply(req, seed) for seed in req.seeds)
        tokens = len(req.prompt.split())
        return GenResult(comps, prompt_tokens=tokens * len(comps))

    def _reply(self, req: GenRequest, seed: int | None) -> Completion:
        # only the literal placeholder: a reply may hold JSON or code braces
        text = self._text(req.role, req.prompt, seed).replace("{seed}", str(seed))
        words = text.split(" ")
        if len(words) > req.params.max_tokens:
            return Completion(" ".join(words[: req.params.max_tokens]), "length", len(words))
        return Completion(text, "stop", len(words))

    def _text(self, role: str, prompt: str, seed: int | None) -> str:
        entries = self.script.get(role) or DEFAULTS.get(role, [""])
        for e in entries:
            if isinstance(e, dict) and str(e.get("match", "")) in prompt:
                return str(e["text"])
        plain = [str(e) for e in entries if not isinstance(e, dict)] or [""]
        digest = hashlib.sha256(f"{prompt}\x1f{seed}".encode()).digest()
        return plain[int.from_bytes(digest[:4], "big") % len(plain)]

    def loglikelihood(self, requests: list[ScoreRequest]) -> list[ScoreResult]:
        """A fixed, made-up score (-0.1 per character): enough to test the plumbing."""
        return [
            ScoreResult(
                tuple(
                    ContinuationScore(-0.1 * len(c), max(1, len(c.split())))
                    for c in r.continuations
                )
            )
            for r in requests
        ]


def _load_script(path: str | None) -> dict[str, list[Any]]:
    if path is None:
        return {}
    try:
        data = json.loads(read_text(Path(path), "script"))
    except json.JSONDecodeError as exc:
        raise UserError(f"invalid JSON: {exc.msg}", file=path, line=exc.lineno) from exc
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise UserError('expected {"assistant": [...], "user": [...]}', file=path)
    return data
