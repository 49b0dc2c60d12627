"""Datasets, registered lazily by name (``NAME``, ``NAME:PATH``, ``NAME?opt=v``)."""

from __future__ import annotations

import importlib
import importlib.util

from userturn.datasets.base import Dataset
from userturn.errors import UserError
from userturn.spec import parse_spec

DATASETS: dict[str, str] = {
    "gsm8k": "userturn.datasets.gsm8k:GSM8K",
    "jsonl": "userturn.datasets.jsonl:JsonlDataset",
    "gsm-symbolic": "userturn.datasets.gsm_symbolic:GSMSymbolic",
    "gpqa": "userturn.datasets.gpqa:GPQA",
    "ifbench": "userturn.datasets.ifbench:IFBench",
    "ifeval": "userturn.datasets.ifeval:IFEval",
    "healthbench": "userturn.datasets.healthbench:HealthBench",
    "healthbench-prompts": "userturn.datasets.healthbench:HealthBenchPrompts",
    "coval": "userturn.datasets.coval:Coval",
    "mtbench": "userturn.datasets.mtbench:MTBench",
    "sharegpt": "userturn.datasets.sharegpt:ShareGPT",
}


def available() -> list[str]:
    """Registered datasets whose module exists in this build."""
    out = []
    for name, target in DATASETS.items():
        if importlib.util.find_spec(target.partition(":")[0]) is not None:
            out.append(name)
    return out


def load_dataset(raw: str, *, skip_bad_rows: bool = False) -> Dataset:
    spec = parse_spec(raw, what="dataset", kinds=set(DATASETS))
    name = spec.kind or spec.target
    if not spec.kind:
        spec = parse_spec(
            f"{name}:" + (f"?{raw.partition('?')[2]}" if "?" in raw else ""),
            what="dataset",
            kinds=set(DATASETS),
        )
    if name not in DATASETS or name not in available():
        raise UserError(
            f"unknown dataset {raw!r} (known: {', '.join(available())})", field="dataset"
        )
    mod_name, _, cls_name = DATASETS[name].partition(":")
    cls = getattr(importlib.import_module(mod_name), cls_name)
    dataset: Dataset = cls(spec, skip_bad_rows=skip_bad_rows)
    return dataset


__all__ = ["DATASETS", "Dataset", "available", "load_dataset"]
