"""Datasets, loaded lazily through the one registry (``userturn.registry.DATASETS``):
``NAME``, ``NAME:PATH`` (a local file in the published format) or ``NAME?opt=v``."""

from __future__ import annotations

from userturn import registry
from userturn.datasets.base import Dataset


def load_dataset(raw: str, *, skip_bad_rows: bool = False) -> Dataset:
    plugin, spec = registry.dataset_spec(raw)
    dataset: Dataset = plugin.load()(spec, skip_bad_rows=skip_bad_rows)
    return dataset


__all__ = ["Dataset", "load_dataset"]
