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
from typing import Any

from userturn.errors import UserError
from userturn.hfmodel import load_hf
from userturn.train.common import (
    TrainResult,
    TrainSettings,
    finish_training,
    parse_train_model,
    require_train_extra,
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


@dataclass(frozen=True, kw_only=True)
class SFTSettings(TrainSettings):
    data: str
    loss_on: LossOn
    max_examples: int = 256

    def check(self) -> None:
        if self.loss_on not in LOSS_ON:
            raise UserError(
                f"expected one of {', '.join(LOSS_ON)}, got {self.loss_on!r}", field="--loss-on"
            )
        self.check_budget("max_examples")
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
            field="--data",
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
    trainer = SFTTrainer(
        model=model,
        args=SFTConfig(**settings.trl_args()),
        train_dataset=train_ds,
        processing_class=tokenizer,
        peft_config=settings.peft_config(),
    )
    trainer.train()
    return finish_training("sft", trainer, tokenizer, spec, settings, asdict(stats), started)
