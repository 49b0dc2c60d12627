"""Perturbations by spec: ``none``, ``truncate[:<fraction>]``, ``append-question[:<text>]``."""

from __future__ import annotations

from userturn.errors import UserError
from userturn.perturb.append_question import AppendQuestion
from userturn.perturb.base import Perturbation
from userturn.perturb.none import NoPerturbation
from userturn.perturb.truncate import Truncate

PERTURBATIONS = {
    "none": "the assistant turn as is",
    "truncate": "keep the first fraction of words (default 0.5)",
    "append-question": "append a generic question (default 'Does that make sense?')",
}


def load_perturbation(raw: str) -> Perturbation:
    kind, _, arg = raw.strip().partition(":")
    if kind == "none" and not arg:
        return NoPerturbation()
    if kind == "truncate":
        return Truncate(arg)
    if kind == "append-question":
        return AppendQuestion(arg)
    raise UserError(
        f"unknown perturbation {raw!r} (known: {', '.join(PERTURBATIONS)})", field="perturb"
    )


__all__ = ["PERTURBATIONS", "Perturbation", "load_perturbation"]
