"""Backends, loaded lazily through the one registry (``userturn.registry.MODELS``), so a
missing extra only matters to those who use it."""

from __future__ import annotations

from userturn import registry
from userturn.backends.base import Backend
from userturn.spec import Spec


def parse_model_spec(raw: str) -> Spec:
    """A checked model spec; named models (``smollm2-135m``) resolve to their backend."""
    return registry.model_spec(raw)[1]


def load_backend(raw: str, defaults: dict[str, str | None] | None = None) -> Backend:
    """Instantiate the backend named by a model spec; fails at config time if it can't.

    ``defaults`` fill options the spec doesn't set (e.g. ``--base-url``).
    """
    plugin, spec = registry.model_spec(raw)
    fill = {k: v for k, v in (defaults or {}).items() if v is not None and k not in spec.options}
    fill = {k: v for k, v in fill.items() if k in plugin.options}
    if fill:
        spec = Spec(spec.kind, spec.target, {**spec.options, **fill}, spec.raw)
    backend: Backend = plugin.load()(spec)
    return backend


__all__ = ["Backend", "load_backend", "parse_model_spec"]
