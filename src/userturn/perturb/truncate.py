"""``truncate:<fraction>``: keep the first fraction of the answer's words (default 0.5).

The paper's strongest positive control: a visibly cut-off answer invites "you didn't
finish" from a model that tracks the conversation. We cut at a word boundary so the cut
never splits a token mid-word, which would itself look like an artifact.
"""

from __future__ import annotations

import re

from userturn.errors import UserError
from userturn.perturb.base import Perturbation

_WORD = re.compile(r"\S+")


class Truncate(Perturbation):
    def __init__(self, arg: str = "") -> None:
        try:
            self.fraction = float(arg) if arg else 0.5
        except ValueError as exc:
            raise UserError(
                f"truncate fraction must be a number, got {arg!r}", field="perturb"
            ) from exc
        if not 0.0 < self.fraction < 1.0:
            raise UserError("truncate fraction must be in (0, 1)", field="perturb")

    @property
    def id(self) -> str:
        return f"truncate:{self.fraction:g}"

    def apply(self, answer: str) -> str:
        words = list(_WORD.finditer(answer))
        if len(words) < 2:
            return answer
        keep = max(1, int(len(words) * self.fraction))
        return answer[: words[keep - 1].end()]
