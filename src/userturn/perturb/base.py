"""Perturbations: named, versioned transforms of the assistant turn (positive controls).

The canonical name (``none``, ``truncate:0.5``, ``append-question:Does that make
sense?``) is stored on every record, never null, and the perturbed turn itself is stored,
so the judge and the report show exactly what the model saw.
"""

from __future__ import annotations

from abc import ABC, abstractmethod


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

    @abstractmethod
    def apply(self, answer: str) -> str:
        """The assistant turn the model will see."""
