"""Perturbations: named, versioned transforms of the assistant turn (positive controls).

The canonical name (``none``, ``truncate:0.5``, ``append-question:Does that make
sense?``) is stored on every record, never null, and the perturbed turn itself is stored,
so the judge and the report show exactly what the model saw.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from userturn.types import Item, PerturbationDetail


@dataclass(frozen=True)
class Perturbed:
    """The assistant turn the model will see, and what was changed when that is more
    than the text shows (``inject-error``: the original and the injected answer)."""

    text: str
    detail: PerturbationDetail | None = None


class Perturbation(ABC):
    version: str
    """Each perturbation declares its own; bump it when ``apply`` changes (it is stored
    beside every perturbed turn)."""
    takes_argument = True
    """Whether the spec may carry ``:<argument>`` (``none`` takes none)."""

    @property
    @abstractmethod
    def id(self) -> str:
        """Canonical name, as stored in records and cells."""

    def perturb(self, answer: str, item: Item, seed: int) -> Perturbed:
        """What the worker calls: the item (its gold data) and a per-item seed are there
        for perturbations that need them; text-only ones just implement ``apply``."""
        return Perturbed(self.apply(answer))

    def rewrite(self, text: str, item: Item, detail: PerturbationDetail) -> str:
        """The same change in another part of the turn (its reasoning, passed to the
        template apart from the answer); text-only perturbations leave it as is."""
        return text

    def apply(self, answer: str) -> str:
        """The assistant turn the model will see (text-only perturbations)."""
        raise NotImplementedError(f"{type(self).__name__} needs the item: call perturb()")
