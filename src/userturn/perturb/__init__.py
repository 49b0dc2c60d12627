"""Perturbations, loaded through the one registry (``userturn.registry.PERTURBATIONS``,
which lists them all with their help: ``userturn run --help`` prints it)."""

from __future__ import annotations

from userturn import registry
from userturn.errors import UserError
from userturn.perturb.base import Perturbation


def load_perturbation(raw: str) -> Perturbation:
    plugin, arg = registry.perturbation_spec(raw)
    cls = plugin.load()
    if arg and not cls.takes_argument:
        raise UserError(f"perturbation {plugin.name!r} takes no argument: {raw!r}", field="perturb")
    perturbation: Perturbation = cls(arg) if cls.takes_argument else cls()
    return perturbation


__all__ = ["Perturbation", "load_perturbation"]
