"""Supervised fine-tuning on multi-turn conversations (TRL ``SFTTrainer`` + PEFT LoRA).

The paper raised follow-up rates with collaboration-oriented SFT on multi-turn data. The
knob that matters for the probe is *where the loss goes*: ``--loss-on user`` trains the
model to write the real human follow-ups of ShareGPT after the user header, which is
exactly the position the probe samples from; ``assistant`` is ordinary chat SFT;
``both`` does both. The examples arrive pre-tokenized with labels (``train.data``), so
TRL trains on our masks as they are, never on its own guess of the turn boundaries.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from userturn.errors import UserError
from userturn.hfmodel import load_hf
from userturn.train.common import (
    TrainResult,
    check_finite,
    logged_losses,
    lora_config,
    parse_train_model,
    require_train_extra,
    save_trained,
    trainer_args,
)
from userturn.train.data import (
    LOSS_ON,
    DataStats,
    Example,
    LossOn,
    build_examples,
    check_source,
    conversations,
    template_from_tokenizer,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SFTSettings:
    model: str
    data: str
    loss_on: LossOn
    out: Path
    lora: bool = True
    max_steps: int = 50
    max_examples: int = 256
    max_length: int = 512
    batch_size: int = 4
    grad_accum: int = 1
    learning_rate: float = 2e-4
    lora_r: int = 16
    lora_alpha: int = 32
    seed: int = 0

    def check(self) -> None:
        if self.loss_on not in LOSS_ON:
            raise UserError(
                f"expected one of {', '.join(LOSS_ON)}, got {self.loss_on!r}", field="loss-on"
            )
        for name in ("max_steps", "max_examples", "max_length", "batch_size", "grad_accum"):
            if getattr(self, name) < 1:
                raise UserError("must be >= 1", field=name.replace("_", "-"))
        if self.learning_rate <= 0:
            raise UserError("must be > 0", field="learning-rate")
        parse_train_model(self.model)
        check_source(self.data)


def sft_examples(
    tokenizer: Any,
    name: str,
    settings: SFTSettings,
) -> tuple[list[Example], DataStats]:
    tpl = template_from_tokenizer(tokenizer, name)
    examples, stats = build_examples(
        tokenizer,
        tpl,
        conversations(settings.data),
        settings.loss_on,
        max_examples=settings.max_examples,
        max_length=settings.max_length,
    )
    if not examples:
        raise UserError(
            f"no usable conversations in {settings.data!r} for --loss-on "
            f"{settings.loss_on} (read {stats.read}, skipped {stats.skipped})",
            field="data",
        )
    return examples, stats


def train_sft(settings: SFTSettings) -> TrainResult:
    """Train, save the adapter (or model) to ``settings.out``, write ``train.json``."""
    settings.check()
    require_train_extra()
    from trl import SFTConfig, SFTTrainer  # type: ignore[attr-defined]

    import datasets

    spec = parse_train_model(settings.model)
    started = time.monotonic()
    model, tokenizer = load_hf(
        spec.target, device=spec.options.get("device"), dtype=spec.options.get("dtype")
    )
    model.train()
    examples, stats = sft_examples(tokenizer, spec.target, settings)
    log.info(
        "sft: %d examples, %d trained tokens of %d", stats.used, stats.trained_tokens, stats.tokens
    )
    train_ds = datasets.Dataset.from_list(
        [{"input_ids": e.input_ids, "labels": e.labels} for e in examples]
    )
    args = SFTConfig(
        **trainer_args(
            settings.out,
            max_steps=settings.max_steps,
            batch_size=settings.batch_size,
            grad_accum=settings.grad_accum,
            learning_rate=settings.learning_rate,
            seed=settings.seed,
            max_length=settings.max_length,
        )
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=train_ds,
        processing_class=tokenizer,
        peft_config=lora_config(settings.lora_r, settings.lora_alpha) if settings.lora else None,
    )
    trainer.train()
    losses = logged_losses(trainer.state.log_history)
    check_finite(losses)
    save_trained(trainer.model, tokenizer, settings.out, settings.lora)
    result = TrainResult(
        method="sft",
        out=settings.out,
        base_spec=spec.base_spec(),
        trained_spec=spec.trained_spec(settings.out, settings.lora),
        lora=settings.lora,
        steps=int(trainer.state.global_step),
        losses=losses,
        settings={**asdict(settings), "out": str(settings.out)},
        data=asdict(stats),
        seconds=round(time.monotonic() - started, 1),
    )
    result.write()
    return result
