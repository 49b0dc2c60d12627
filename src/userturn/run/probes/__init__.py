"""The three probes as parts the driver runs: ``generate``, ``likelihood``, ``rollout``.

Each module holds one probe: its plan checks, its work counts and the stage that turns
chunks of items into records. A new probe is a module beside these and a line in
:data:`PROBES`; nothing outside this package branches on a probe's name.
"""

from __future__ import annotations

from userturn.config import RunConfig
from userturn.run.probes.base import Known, Probe, Stage
from userturn.run.probes.generate import GenerateProbe
from userturn.run.probes.likelihood import LikelihoodProbe
from userturn.run.probes.rollout import RolloutProbe

PROBES: dict[str, type[GenerateProbe | LikelihoodProbe | RolloutProbe]] = {
    p.name: p for p in (GenerateProbe, LikelihoodProbe, RolloutProbe)
}


def probe_for(cfg: RunConfig) -> Probe:
    """The probe ``cfg.probe`` names, built from the run's config."""
    return PROBES[cfg.probe](cfg)


__all__ = ["PROBES", "Known", "Probe", "Stage", "probe_for"]
