"""``none``: the assistant turn as generated (or as given, for held-out items)."""

from __future__ import annotations

from userturn.perturb.base import Perturbation


class NoPerturbation(Perturbation):
    version = "1"
    takes_argument = False

    @property
    def id(self) -> str:
        return "none"

    def apply(self, answer: str) -> str:
        return answer
