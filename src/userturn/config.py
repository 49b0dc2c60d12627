"""Run configuration: one pydantic model for CLI flags, YAML experiments and manifests.

Precedence is CLI > YAML > defaults (lm-evaluation-harness style). Unknown keys fail,
because a typo in an experiment file should stop a 10-hour grid, not be ignored.
``manifest.yaml``'s ``config:`` block is this model dumped, so a run reproduces with
``userturn run --config DIR/manifest.yaml``.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from userturn.errors import UserError, read_text


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    models: list[str] = Field(default_factory=lambda: ["smollm2-135m"], min_length=1)
    datasets: list[str] = Field(default_factory=lambda: ["gsm8k"], min_length=1)
    limit: int | None = Field(default=None, ge=1)
    """Keep the first N items (after ``items`` and ``sample``)."""
    sample: int | None = Field(default=None, ge=1)
    """Draw N items at random, seeded by ``seed`` (the same N items on every rerun)."""
    items: list[str] | None = Field(default=None, min_length=1)
    """Only these item ids."""
    temperatures: list[float] = Field(default_factory=lambda: [0.0, 1.0], min_length=1)
    samples: int = Field(default=1, ge=1)
    perturbations: list[str] = Field(default_factory=lambda: ["none"], min_length=1)
    judges: list[str] = Field(default_factory=lambda: ["offline"])
    seed: int = 0
    probe: Literal["generate", "likelihood", "rollout"] = "generate"
    """``generate`` samples user turns and judges them; ``likelihood`` scores the real next
    turn against degenerate candidates under the model's own user header (no judge);
    ``rollout`` plays ``turns`` user turns per conversation (``userturn rollout``)."""
    turns: int = Field(default=3, ge=1)
    """Rollouts: user turns per conversation."""
    stop_on: Literal["degenerate", "never"] = "never"
    """Rollouts: end a conversation at its first user turn the first judge calls degenerate."""
    best_of: int = Field(default=1, ge=1)
    """Rollouts: candidate user turns sampled per step; the most genuine is kept."""
    select_judge: str | None = None
    """Rollouts: the judge that chooses among best-of candidates and decides ``stop_on``
    (default: the first of ``judges``). A best-of cell scored by the judge that chose it
    is biased upward, so ``best_of`` > 1 needs either a second judge in ``judges`` or
    this option naming the selector."""
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
    system_placement: Literal["template", "first-turn"] = "template"
    """Where a system message goes when the template would fold it into the *next* user
    turn (Mistral): refuse (``template``) or fold it into the first turn (``first-turn``)."""
    base_url: str | None = None
    judge_base_url: str | None = None
    judge_reference: bool = False
    skip_bad_rows: bool = False
    keep_configs: bool = False
    """Let a run directory hold a second config fingerprint, as separate cells."""
    executor: Literal["local", "ray"] = "local"
    address: str | None = None
    workers: int = Field(default=2, ge=1)
    frozen_date: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}$")
    """The date templates see (``strftime_now``); a manifest sets it so that a
    reproduction renders the same prompts on another day. None: today, frozen per run."""

    @field_validator("temperatures")
    @classmethod
    def _temps(cls, v: list[float]) -> list[float]:
        if any(not math.isfinite(t) for t in v):
            raise ValueError("temperatures must be finite numbers")
        if any(t < 0 for t in v):
            raise ValueError("temperatures must be >= 0")
        return sorted(dict.fromkeys(float(t) for t in v))

    @field_validator(
        "limit",
        "sample",
        "samples",
        "seed",
        "turns",
        "best_of",
        "max_answer_tokens",
        "max_user_tokens",
        "top_k",
        "workers",
        "answer_temperature",
        "top_p",
        "temperatures",
        mode="before",
    )
    @classmethod
    def _not_bool(cls, v: Any) -> Any:
        """``limit: true`` is a typo, not 1: pydantic would read a YAML boolean as a number."""
        if isinstance(v, bool) or (isinstance(v, list) and any(isinstance(x, bool) for x in v)):
            raise ValueError(f"expected a number, got {str(v).lower()}")
        return v

    @field_validator("answer_temperature", "top_p", mode="before")
    @classmethod
    def _finite(cls, v: Any) -> Any:
        """Before the range checks, so NaN reads "must be finite", not ">= 0"."""
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"must be a finite number, got {v}")
        return v

    def hash(self) -> str:
        """Short hash of what changes results (not where they go or how they're run): the
        default run directory's name, so the same command resumes the same run."""
        data = self.model_dump(include=set(FINGERPRINT) | set(SELECTION))
        if data["select_judge"] is None:  # unset: the hash of every earlier run stays
            del data["select_judge"]
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:8]

    def fingerprint(self, frozen_date: str) -> tuple[str, dict[str, Any]]:
        """(config id, options): every option that changes what a row contains.

        The fields are those of :data:`FINGERPRINT`; :data:`FIELD_ROLES` places every
        other field. The rollout options are in it only for rollouts (a one-turn run
        ignores them, and leaving them out keeps its id), and with them the judge that
        steers the conversation (best-of choice, early stop), since another judge keeps
        other turns.
        """
        opts: dict[str, Any] = {
            name: getattr(self, name) for name in FINGERPRINT if name not in ROLLOUT_ONLY
        }
        own = PROBE_ONLY.get(self.probe, ())
        opts.update({name: getattr(self, name) for name in own})
        if "select_judge" in own:  # as resolved: the first judge steers when none is named
            opts["select_judge"] = self.steering_judge()
        opts["chat_template"] = _file_sha(self.chat_template)
        opts["frozen_date"] = frozen_date
        blob = json.dumps(opts, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:12], opts

    def steering_judge(self) -> str | None:
        """The judge whose verdicts decide a rollout's turns (best-of choice, early stop):
        ``select_judge``, else the first judge; None when no verdict steers."""
        if self.best_of <= 1 and self.stop_on == "never":
            return None
        return self.select_judge or (self.judges[0] if self.judges else None)


FIELD_ROLES: dict[str, str] = {
    # experiment: in the config fingerprint (rows made otherwise never share a cell)
    "seed": "experiment",
    "max_answer_tokens": "experiment",
    "max_user_tokens": "experiment",
    "answer_temperature": "experiment",
    "top_p": "experiment",
    "top_k": "experiment",
    "system_prompt": "experiment",
    "chat_template": "experiment",
    "bos_token": "experiment",
    "eos_token": "experiment",
    "chat_template_kwargs": "experiment",
    "history_reasoning": "experiment",
    "system_placement": "experiment",
    "frozen_date": "experiment",
    "stop_on": "experiment",
    "best_of": "experiment",
    "select_judge": "experiment",
    # selection: which rows exist; each is a cell key or an item id already
    "models": "selection",
    "datasets": "selection",
    "limit": "selection",
    "sample": "selection",
    "items": "selection",
    "temperatures": "selection",
    "samples": "selection",
    "perturbations": "selection",
    "probe": "selection",
    "turns": "selection",
    "judge_reference": "selection",
    "skip_bad_rows": "selection",
    # cosmetic: where results go and how the work is run; the rows are the same
    "judges": "cosmetic",
    "base_url": "cosmetic",
    "judge_base_url": "cosmetic",
    "keep_configs": "cosmetic",
    "executor": "cosmetic",
    "address": "cosmetic",
    "workers": "cosmetic",
}
"""Every RunConfig field, placed once. ``experiment`` fields change what a stored row
contains and make the config fingerprint; ``selection`` fields choose which rows exist
(they are cell keys, rollout turns or item ids, so a second grid adds cells instead of
pooling) and name the default run directory with the experiment fields; ``cosmetic``
fields change neither. Judges are cosmetic here because each judge is a cell key of its
own; the one judge that steers a rollout enters the fingerprint as ``select_judge``."""

FINGERPRINT = tuple(k for k, v in FIELD_ROLES.items() if v == "experiment")
SELECTION = tuple(k for k, v in FIELD_ROLES.items() if v == "selection")
ROLLOUT_ONLY = ("stop_on", "best_of", "select_judge")
"""Experiment fields that only a rollout reads (in its fingerprint, not a one-turn run's)."""
PROBE_ONLY: dict[str, tuple[str, ...]] = {"rollout": ROLLOUT_ONLY}
"""The experiment fields each probe reads beyond the shared ones, by probe."""


def _file_sha(path: str | None) -> str | None:
    if path is None:
        return None
    p = Path(path)
    if not p.is_file():
        raise UserError("chat template file not found", file=path, field="chat-template")
    return hashlib.sha256(p.read_bytes()).hexdigest()


def config_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``["seed 0 -> 1", ...]``: how two fingerprints' options differ, for one line."""
    keys = sorted(set(old) | set(new))
    return [f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in keys if old.get(k) != new.get(k)]


def _yaml_line(text: str, key: str) -> int | None:
    for i, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith(f"{key}:"):
            return i
    return None


class _DuplicateKey(Exception):
    def __init__(self, key: str, line: int, first: int) -> None:
        super().__init__(key)
        self.key, self.line, self.first = key, line, first


class _UniqueKeyLoader(yaml.SafeLoader):
    """The safe loader, refusing a key given twice in one mapping: YAML's own rule, which
    PyYAML does not enforce (it keeps the last value, silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            line = key_node.start_mark.line + 1
            if isinstance(key, str | int | float | bool) and key in first:
                raise _DuplicateKey(str(key), line, first[key])
            if isinstance(key, str | int | float | bool):
                first[key] = line
        return super().construct_mapping(node, deep=deep)


def load_config(path: str | Path, overrides: dict[str, Any]) -> RunConfig:
    """Load a YAML experiment (or a manifest with a ``config:`` block) plus CLI overrides."""
    p = Path(path)
    text = read_text(p, "config file")
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader
    except _DuplicateKey as exc:
        raise UserError(
            f"duplicate key (first on line {exc.first})", file=str(p), line=exc.line, field=exc.key
        ) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise UserError(
            f"invalid YAML: {getattr(exc, 'problem', exc)}",
            file=str(p),
            line=None if mark is None else mark.line + 1,
        ) from exc
    if data is None:
        raise UserError("the config file is empty (expected keys such as models:)", file=str(p))
    if not isinstance(data, dict):
        raise UserError("expected a mapping at the top level", file=str(p), line=1)
    if "config" in data and isinstance(data["config"], dict):
        data = data["config"]
    return build_config({**data, **overrides}, file=str(p), text=text, flags=set(overrides))


FLAG_NAMES = {
    "models": "--model",
    "datasets": "--dataset",
    "perturbations": "--perturb",
    "judges": "--judge",
}
"""RunConfig fields whose flag is not ``--`` + the field name with dashes."""


def flag_name(field: str) -> str:
    """The command-line flag that sets a RunConfig field (``max_user_tokens`` ->
    ``--max-user-tokens``), so an error names what the user typed."""
    return FLAG_NAMES.get(field, "--" + field.replace("_", "-"))


def build_config(
    data: dict[str, Any],
    *,
    file: str | None = None,
    text: str = "",
    flags: set[str] | None = None,
) -> RunConfig:
    """A validated RunConfig, or one line naming the culprit: the YAML key and line for a
    value from ``file``, the flag for a value from the command line (the keys in
    ``flags``; every key when there is no file)."""
    try:
        return RunConfig(**data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(x) for x in err["loc"]]
        top = loc[0] if loc else ""
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        msg = msg.removeprefix("Value error, ")
        if file is None or top in (flags or set()):
            field = flag_name(top) + "".join(f"[{x}]" for x in loc[1:]) if top else "config"
            raise UserError(msg, field=field) from exc
        raise UserError(
            msg,
            file=file,
            line=_yaml_line(text, top) if text else None,
            field=".".join(loc) or "config",
        ) from exc
