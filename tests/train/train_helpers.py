"""Shared checks for the trainer tests (not a test module)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def train_json(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "train.json").read_text(encoding="utf-8"))
    return data


def assert_finite_losses(meta: dict[str, Any], steps: int) -> None:
    losses = [e["loss"] for e in meta["losses"]]
    assert meta["steps"] == steps
    assert len(losses) == steps, meta["losses"]
    assert all(math.isfinite(x) for x in losses), losses


def logits(target: str, adapter: str | None, text: str) -> Any:
    import torch

    from userturn.hfmodel import load_hf

    model, tok = load_hf(target, adapter=adapter, device="cpu")
    ids = tok(text, add_special_tokens=False, return_tensors="pt")
    with torch.inference_mode():
        return model(**ids).logits[0, -1].float()


def assert_adapter_changes_outputs(adapter: Path, text: str) -> None:
    """The saved adapter loads on the base (as the probe loads it) and moves its logits."""
    assert (adapter / "adapter_config.json").is_file()
    assert any(adapter.glob("adapter_model.*"))
    base = logits("smollm2-135m", None, text)
    tuned = logits("smollm2-135m", str(adapter), text)
    delta = float((base - tuned).abs().max())
    assert delta > 1e-3, f"adapter left the logits unchanged (max |Δ| = {delta})"
