"""What a judge is: a batched function from (context, user turn) to a Judgment.

A judge sees only ``JudgeInput`` (the context messages and the candidate turn), never
the model, dataset or reference turn, so verdicts can't leak metadata. ``version`` is
part of the cache key: changing a rubric re-judges instead of mixing verdicts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

from userturn.spec import Spec
from userturn.types import JudgeInput, Judgment


class Judge(ABC):
    version: str = "1"

    def __init__(self, spec: Spec) -> None:
        self.spec = spec

    @property
    def id(self) -> str:
        """The judge's name in cells and label files (its spec, e.g. ``rules``)."""
        return self.spec.raw

    @abstractmethod
    def judge(self, inputs: list[JudgeInput]) -> list[Judgment]:
        """One Judgment per input, in input order. Never raises for one bad output:
        that output becomes ``status="unparseable"`` or ``"error"``."""

    def judge_each(self, inputs: list[JudgeInput]) -> Iterator[tuple[int, Judgment]]:
        """(input index, Judgment) for every input, each as soon as it is known, in any
        order: a caller that stores each one before asking for the next loses no paid
        call to a kill. Offline judges answer a batch at once, so this default is theirs."""
        yield from enumerate(self.judge(inputs))

    def estimate(self, n_turns: int) -> dict[str, float | int | None]:
        """Calls and cost to judge ``n_turns`` (for ``--dry-run``); free for offline judges."""
        return {"calls": 0, "cost_usd": 0.0}

    def check_reachable(self) -> None:  # noqa: B027 - optional hook
        """Fail now, in one line, if the judge can't work (e.g. its server is down), so a
        run stops before generating rather than after."""

    def calls_saved(self) -> int:
        """LLM calls avoided (cascade); 0 for judges that make none."""
        return 0

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release clients."""
