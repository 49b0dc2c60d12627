"""Run configuration: one pydantic model for CLI flags, YAML experiments and manifests.

Precedence is CLI > YAML > defaults (lm-evaluation-harness style). Unknown keys fail,
because a typo in an experiment file should stop a 10-hour grid, not be ignored.
``manifest.yaml``'s ``config:`` block is this model dumped, so a run reproduces with
``userturn run --config DIR/manifest.yaml``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from userturn.errors import UserError


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    models: list[str] = Field(default_factory=lambda: ["smollm2-135m"], min_length=1)
    datasets: list[str] = Field(default_factory=lambda: ["gsm8k"], min_length=1)
    limit: int | None = Field(default=None, ge=1)
    temperatures: list[float] = Field(default_factory=lambda: [0.0, 1.0], min_length=1)
    samples: int = Field(default=1, ge=1)
    perturbations: list[str] = Field(default_factory=lambda: ["none"], min_length=1)
    judges: list[str] = Field(default_factory=lambda: ["rules"])
    seed: int = 0
    max_answer_tokens: int = Field(default=512, ge=1)
    max_user_tokens: int = Field(default=256, ge=1)
    answer_temperature: float = Field(default=0.0, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=0)
    system_prompt: str | None = None
    chat_template: str | None = None
    bos_token: str | None = None
    eos_token: str | None = None
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    history_reasoning: Literal["template", "strip", "keep"] = "template"
    base_url: str | None = None
    judge_base_url: str | None = None
    judge_reference: bool = False
    skip_bad_rows: bool = False
    executor: Literal["local", "ray"] = "local"
    address: str | None = None
    workers: int = Field(default=2, ge=1)
    frozen_date: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}$")
    """The date templates see (``strftime_now``); a manifest sets it so that a
    reproduction renders the same prompts on another day. None: today, frozen per run."""

    @field_validator("temperatures")
    @classmethod
    def _temps(cls, v: list[float]) -> list[float]:
        if any(t < 0 for t in v):
            raise ValueError("temperatures must be >= 0")
        return sorted(dict.fromkeys(float(t) for t in v))

    def hash(self) -> str:
        """Short hash of what changes results (not where they go or how they're run)."""
        skip = {"executor", "address", "workers", "base_url", "judge_base_url", "judges"}
        data = self.model_dump(exclude=skip)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:8]


def _yaml_line(text: str, key: str) -> int | None:
    for i, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith(f"{key}:"):
            return i
    return None


def load_config(path: str | Path, overrides: dict[str, Any]) -> RunConfig:
    """Load a YAML experiment (or a manifest with a ``config:`` block) plus CLI overrides."""
    p = Path(path)
    if not p.is_file():
        raise UserError("config file not found", file=str(p))
    text = p.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise UserError(
            f"invalid YAML: {getattr(exc, 'problem', exc)}",
            file=str(p),
            line=None if mark is None else mark.line + 1,
        ) from exc
    if not isinstance(data, dict):
        raise UserError("expected a mapping at the top level", file=str(p), line=1)
    if "config" in data and isinstance(data["config"], dict):
        data = data["config"]
    return build_config({**data, **overrides}, file=str(p), text=text)


def build_config(data: dict[str, Any], *, file: str = "<cli>", text: str = "") -> RunConfig:
    try:
        return RunConfig(**data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "config"
        top = str(err["loc"][0]) if err["loc"] else ""
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        raise UserError(
            msg, file=file, line=_yaml_line(text, top) if text else None, field=field
        ) from exc
