"""DPO on self-play pairs (TRL ``DPOTrainer`` + PEFT LoRA).

Each pair is scored where the probe samples: the prompt is the model's own user-turn
prompt for the pair's context (``chat.user_turn_prompt``: the conversation, then the
user header), and the two completions are the genuine and the degenerate user turn,
each closed with the template's user end marker, so the model also learns where a real
user turn stops. The prompt is plain text (not "conversational"): TRL's chat path only
knows how to open an assistant turn. With LoRA, the reference model is the base with the
adapter switched off, so no second copy of the weights is held.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from userturn.chat import ChatTemplate, TurnMarkers, derive_markers, user_turn_prompt
from userturn.datasets._rows import jsonl_rows
from userturn.errors import UserError
from userturn.hfmodel import load_hf
from userturn.train.common import (
    TrainResult,
    TrainSettings,
    finish_training,
    parse_train_model,
    require_train_extra,
)
from userturn.train.data import template_from_tokenizer
from userturn.train.pairs import PairStats, pairs_from_run

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class DPOSettings(TrainSettings):
    from_run: Path | None = None
    pairs_file: Path | None = None
    judge: str | None = None
    max_steps: int = 30
    max_pairs_per_context: int = 4
    max_length: int = 768
    batch_size: int = 2
    learning_rate: float = 5e-5
    beta: float = 0.1

    def check(self) -> None:
        if (self.from_run is None) == (self.pairs_file is None):
            raise UserError(
                "give exactly one of --from-run DIR or --pairs FILE", field="--from-run"
            )
        if self.beta <= 0:
            raise UserError("must be > 0", field="--beta")
        self.check_budget("max_pairs_per_context")


def load_pairs(settings: DPOSettings) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Pairs from a run (extracted now) or from an exported pairs file."""
    if settings.from_run is not None:
        pairs, stats, judge = pairs_from_run(
            settings.from_run, settings.judge, max_per_context=settings.max_pairs_per_context
        )
        info: dict[str, Any] = {"from_run": str(settings.from_run), "judge": judge, **asdict(stats)}
    else:
        assert settings.pairs_file is not None
        pairs = [
            _check_pair(row.data, str(row.file), row.line, row.error)
            for row in jsonl_rows(settings.pairs_file)
        ]
        info = {"pairs_file": str(settings.pairs_file), "pairs": len(pairs)}
    if not pairs:
        where = settings.from_run or settings.pairs_file
        raise UserError(
            "no preference pairs: no context has both a genuine and a "
            "non-genuine user turn (sample more: T>0 and --samples k>=4)",
            file=str(where),
            field="--from-run",
        )
    info["items"] = sorted(
        {f"{p['dataset']}/{p['item_id']}" for p in pairs if "dataset" in p and "item_id" in p}
    )
    return pairs, info


def _check_pair(
    data: dict[str, Any], file: str, line: int, error: UserError | None
) -> dict[str, Any]:
    if error is not None:
        raise error
    for key, kind in (("messages", list), ("chosen", str), ("rejected", str)):
        if not isinstance(data.get(key), kind):
            raise UserError(f"expected {kind.__name__}", file=file, line=line, field=key)
    return data


def _end_marker(tpl: ChatTemplate, markers: TurnMarkers) -> str:
    """What closes a user turn: the derived marker, else the first stop the probe uses."""
    end = markers.user_end.strip()
    return end or next(iter(markers.user_stops(tpl)), "")


def dpo_rows(tpl: ChatTemplate, pairs: list[dict[str, Any]]) -> list[dict[str, str]]:
    """TRL's standard preference rows: prompt text, chosen and rejected continuations."""
    markers = derive_markers(tpl)
    end = _end_marker(tpl, markers)
    rows = []
    for p in pairs:
        prompt = user_turn_prompt(tpl, list(p["messages"]), markers).prompt
        rows.append(
            {"prompt": prompt, "chosen": p["chosen"] + end, "rejected": p["rejected"] + end}
        )
    return rows


def train_dpo(settings: DPOSettings) -> TrainResult:
    """Train on self-play pairs, save the adapter (or model), write ``train.json``."""
    settings.check()
    require_train_extra()
    from trl import DPOConfig, DPOTrainer  # type: ignore[attr-defined]

    import datasets

    spec = parse_train_model(settings.model)
    pairs, info = load_pairs(settings)
    started = time.monotonic()
    model, tokenizer = load_hf(
        spec.target, device=spec.options.get("device"), dtype=spec.options.get("dtype")
    )
    model.train()
    rows = dpo_rows(template_from_tokenizer(tokenizer, spec.target), pairs)
    trainer = DPOTrainer(
        model=model,
        args=DPOConfig(beta=settings.beta, **settings.trl_args()),
        train_dataset=datasets.Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=settings.peft_config(),
    )
    trainer.train()
    settings.out.mkdir(parents=True, exist_ok=True)
    settings.out.joinpath("pairs.jsonl").write_text(
        "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs), encoding="utf-8"
    )
    return finish_training("dpo", trainer, tokenizer, spec, settings, info, started)


__all__ = ["DPOSettings", "PairStats", "dpo_rows", "load_pairs", "train_dpo"]
