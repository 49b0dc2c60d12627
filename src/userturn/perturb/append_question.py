"""``append-question[:<text>]``: end the answer with a generic question to the user.

The paper's second control: an explicit invitation to reply. Default text "Does that
make sense?" (the paper does not give its wording).
"""

from __future__ import annotations

from userturn.perturb.base import Perturbation

DEFAULT_QUESTION = "Does that make sense?"


class AppendQuestion(Perturbation):
    version = "1"

    def __init__(self, arg: str = "") -> None:
        self.question = arg or DEFAULT_QUESTION

    @property
    def id(self) -> str:
        return f"append-question:{self.question}"

    def apply(self, answer: str) -> str:
        body = answer.rstrip()
        return f"{body}\n\n{self.question}" if body else self.question
