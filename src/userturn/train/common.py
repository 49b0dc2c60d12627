"""What SFT and DPO share: the model spec, LoRA, loss logging and the saved artifacts.

A training output folder is the thing the probe runs afterwards: with LoRA it is a PEFT
adapter folder (``hf:BASE?adapter=OUT``), without it a full transformers model
(``hf:OUT``). Beside the weights, ``train.json`` records what was trained on, how, and
every logged loss, so a before/after table can always be traced to its training.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from userturn.errors import UserError, missing_extra
from userturn.spec import parse_spec

log = logging.getLogger(__name__)

TRAIN_FILE = "train.json"
_OTHER_KINDS = {"llamacpp", "vllm", "openai"}
_LOAD_OPTIONS = ("device", "dtype")
EVAL_BACKENDS = ("hf", "vllm")


@dataclass(frozen=True)
class TrainModel:
    """The model to train: a transformers target plus load options."""

    target: str
    options: dict[str, str] = field(default_factory=dict)

    def base_spec(self, kind: str = "hf", extra: dict[str, str] | None = None) -> str:
        """The probe's spec for the untrained model (the "before"). ``extra`` adds
        backend options for the evaluation runs (e.g. ``batch=32``, ``tp=2``)."""
        return _spec(kind, self.target, {**self._options(kind), **(extra or {})})

    def trained_spec(
        self, out: Path, lora: bool, kind: str = "hf", extra: dict[str, str] | None = None
    ) -> str:
        """The probe's spec for the trained model (the "after"), on the hf backend or
        on vLLM (which serves a LoRA adapter with ``?adapter=`` too)."""
        opts = {**self._options(kind), **(extra or {})}
        if lora:
            return _spec(kind, self.target, {**opts, "adapter": str(out.resolve())})
        return _spec(kind, str(out.resolve()), opts)

    def _options(self, kind: str) -> dict[str, str]:
        if kind not in EVAL_BACKENDS:
            raise UserError(
                f"expected one of {', '.join(EVAL_BACKENDS)}, got {kind!r}", field="--eval-backend"
            )
        # vLLM places the model itself; only the dtype carries over.
        return (
            dict(self.options)
            if kind == "hf"
            else {k: v for k, v in self.options.items() if k == "dtype"}
        )


def eval_options(text: str | None) -> dict[str, str]:
    """``--eval-options "batch=32&dtype=bfloat16"``: backend options for both eval runs."""
    if not text:
        return {}
    opts = dict(parse_qsl(text, keep_blank_values=True))
    if not opts or "adapter" in opts or any(not k for k in opts):
        raise UserError(
            f"expected key=value&key=value backend options (no adapter), got {text!r}",
            field="--eval-options",
        )
    return opts


def _spec(kind: str, target: str, options: dict[str, str]) -> str:
    query = "&".join(f"{k}={v}" for k, v in options.items())
    return f"{kind}:{target}" + (f"?{query}" if query else "")


def parse_train_model(raw: str) -> TrainModel:
    """``hf:ID_OR_PATH[?device=..&dtype=..]`` or a bare target (``smollm2-135m`` is the
    embedded model through transformers). Other backends can't be trained here."""
    spec = parse_spec(raw, what="model", kinds={"hf", *_OTHER_KINDS})
    if spec.kind in _OTHER_KINDS:
        raise UserError(
            f"training needs a transformers model (hf:ID_OR_PATH), got {raw!r}", field="--model"
        )
    unknown = sorted(set(spec.options) - set(_LOAD_OPTIONS))
    if unknown:
        raise UserError(
            f"unknown option(s) {', '.join(unknown)} for a model to train "
            f"(known: {', '.join(_LOAD_OPTIONS)})",
            field="--model",
        )
    return TrainModel(spec.target, dict(spec.options))


def require_train_extra() -> None:
    """Fail at config time, with the install hint, when TRL or PEFT is missing."""
    for name in ("torch", "transformers", "trl", "peft", "datasets"):
        try:
            __import__(name)
        except ModuleNotFoundError as exc:
            raise missing_extra("train", exc.name or name) from exc


def lora_config(r: int, alpha: int, dropout: float = 0.05) -> Any:
    """LoRA on every linear layer but the head: small, and model-family agnostic."""
    from peft import LoraConfig

    return LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )


@dataclass(frozen=True, kw_only=True)
class TrainSettings:
    """The budget and LoRA knobs SFT and DPO share (each overrides its own defaults)."""

    model: str
    out: Path
    lora: bool = True
    max_steps: int = 50
    max_length: int = 512
    batch_size: int = 4
    grad_accum: int = 1
    learning_rate: float = 2e-4
    lora_r: int = 16
    lora_alpha: int = 32
    seed: int = 0

    def check_budget(self, *extra: str) -> None:
        """Counts must be >= 1 and the learning rate > 0, named as the CLI flag."""
        for name in ("max_steps", "max_length", "batch_size", "grad_accum", *extra):
            if getattr(self, name) < 1:
                raise UserError("must be >= 1", field="--" + name.replace("_", "-"))
        if self.learning_rate <= 0:
            raise UserError("must be > 0", field="--learning-rate")
        parse_train_model(self.model)

    def trl_args(self) -> dict[str, Any]:
        return trainer_args(
            self.out,
            max_steps=self.max_steps,
            batch_size=self.batch_size,
            grad_accum=self.grad_accum,
            learning_rate=self.learning_rate,
            seed=self.seed,
            max_length=self.max_length,
        )

    def peft_config(self) -> Any:
        return lora_config(self.lora_r, self.lora_alpha) if self.lora else None

    def to_json(self) -> dict[str, Any]:
        return {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}


def finish_training(
    method: str,
    trainer: Any,
    tokenizer: Any,
    spec: TrainModel,
    settings: TrainSettings,
    data: dict[str, Any],
    started: float,
) -> TrainResult:
    """After ``trainer.train()``: check the losses, save, write and return ``train.json``."""
    losses = logged_losses(trainer.state.log_history)
    check_finite(losses)
    save_trained(trainer.model, tokenizer, settings.out, settings.lora)
    result = TrainResult(
        method=method,
        out=settings.out,
        base_spec=spec.base_spec(),
        trained_spec=spec.trained_spec(settings.out, settings.lora),
        lora=settings.lora,
        steps=int(trainer.state.global_step),
        losses=losses,
        settings=settings.to_json(),
        data=data,
        seconds=round(time.monotonic() - started, 1),
    )
    result.write()
    return result


def trainer_args(
    out: Path,
    *,
    max_steps: int,
    batch_size: int,
    grad_accum: int,
    learning_rate: float,
    seed: int,
    max_length: int,
) -> dict[str, Any]:
    """Config keys both TRL configs take. bf16 and checkpointing only on a GPU: on a
    CPU they make a 135M model slower, not lighter."""
    import torch
    from transformers import TrainingArguments

    gpu = torch.cuda.is_available()
    # transformers 5 renamed gradient_checkpointing (the old name warns on every run)
    fields = getattr(TrainingArguments, "__dataclass_fields__", {})
    new_name = "activation_checkpointing" in fields
    ckpt = "activation_checkpointing" if new_name else "gradient_checkpointing"
    return {
        "output_dir": str(out / "checkpoints"),
        "max_steps": max_steps,
        "per_device_train_batch_size": batch_size,
        "gradient_accumulation_steps": grad_accum,
        "learning_rate": learning_rate,
        "seed": seed,
        "max_length": max_length,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "bf16": gpu,
        ckpt: gpu,
        "use_cpu": not gpu,
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
    }


def logged_losses(log_history: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Per-step training logs (loss and friends), without the final summary entry."""
    keep = ("step", "loss", "learning_rate", "grad_norm", "rewards/accuracies", "rewards/margins")
    return [{k: float(e[k]) for k in keep if k in e} for e in log_history if "loss" in e]


def check_finite(losses: list[dict[str, float]]) -> None:
    bad = [e for e in losses if not math.isfinite(e["loss"])]
    if bad:
        raise UserError(
            f"training diverged: loss {bad[0]['loss']} at step "
            f"{int(bad[0].get('step', 0))}; lower --learning-rate"
        )


@dataclass
class TrainResult:
    """What a trainer returns and writes to ``OUT/train.json``."""

    method: str
    out: Path
    base_spec: str
    trained_spec: str
    lora: bool
    steps: int
    losses: list[dict[str, float]]
    settings: dict[str, Any]
    data: dict[str, Any]
    seconds: float

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["out"] = str(self.out)
        return d

    def write(self) -> Path:
        path = self.out / TRAIN_FILE
        path.write_text(json.dumps(self.to_json(), indent=2, default=str) + "\n", encoding="utf-8")
        return path

    @classmethod
    def read(cls, out: Path) -> TrainResult:
        """A finished training folder (to evaluate it again without retraining)."""
        path = out / TRAIN_FILE
        if not path.is_file():
            raise UserError("not a training output folder (no train.json)", file=str(out))
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
            d["out"] = out  # the folder may have moved since training
            return cls(**d)
        except (json.JSONDecodeError, TypeError) as exc:
            raise UserError(f"unreadable train.json: {exc}", file=str(path)) from exc


def save_trained(model: Any, tokenizer: Any, out: Path, lora: bool) -> None:
    """The adapter alone with LoRA (small; applied on the base at load); otherwise the
    whole model plus its tokenizer, so ``hf:OUT`` loads on its own."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    if not lora:
        tokenizer.save_pretrained(str(out))
    log.info("saved the trained %s to %s", "adapter" if lora else "model", out)
