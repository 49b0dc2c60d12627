"""The probe run by inspect_ai (``userturn_probe`` task) equals ``userturn run`` on the same items.

Both sides talk to one real ``python -m llama_cpp.server`` (SmolLM2, 127.0.0.1) that
evaluates prompts one token at a time (``llama_server_unbatched``): the two send their
requests in different orders, and on a batching server a T=0 completion can depend on
what was evaluated before it (seen in CI, 2026-12-02). userturn talks to it
through its ``openai:`` backend, inspect through its ``openai-api-completions``
provider (raw prompts to ``/v1/completions``) with userturn's solver and scorer. At T=0
the prompts (by hash), answers, user turns and the rules judge's verdicts must match
item by item, and the log inspect reads back must carry the same rate.

Needs the ``[inspect]`` and ``[llamacpp]`` extras. Run:
``.venv/bin/python -m pytest tests/test_inspect_task.py -q`` (about a minute).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from userturn.backends import load_backend
from userturn.config import RunConfig
from userturn.run.driver import run

pytest.importorskip("inspect_ai")

LIMIT = 3
SETTINGS = {"max_answer_tokens": 48, "max_user_tokens": 24}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, smollm2_path: Path) -> Path:
    """The GGUF's own chat template as a file, for both sides."""
    source = load_backend(f"llamacpp:{smollm2_path}").builtin_template()[0]
    path = tmp_path_factory.mktemp("tpl") / "smollm2.jinja"
    path.write_text(source, encoding="utf-8")
    return path


def test_inspect_eval_matches_userturn_run(
    llama_server_unbatched: str,
    template: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from inspect_ai import eval as inspect_eval
    from inspect_ai.log import read_eval_log

    from userturn.interop.inspect_registry import userturn_probe

    spec = "openai:smollm2"
    cfg = RunConfig(
        models=[spec],
        base_url=llama_server_unbatched,
        datasets=["gsm8k"],
        limit=LIMIT,
        temperatures=[0.0],
        judges=["rules"],
        chat_template=str(template),
        **SETTINGS,
    )
    result = run(cfg, tmp_path / "userturn")
    mine = {r["item_id"]: r for r in map(json.loads, (result.out / "records.jsonl").open())}
    assert len(mine) == LIMIT

    monkeypatch.setenv("LLAMACPP_API_KEY", "unused")  # inspect asks for one; llama.cpp ignores it
    task = userturn_probe(  # the task as inspect's registry declares it
        template_model=f"{spec}?base_url={llama_server_unbatched}",
        dataset="gsm8k",
        limit=LIMIT,
        judge="rules",
        chat_template=str(template),
        **SETTINGS,
    )
    (log,) = inspect_eval(
        task,
        model="openai-api-completions/llamacpp/smollm2",
        model_base_url=llama_server_unbatched,
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    assert log.status == "success", log.error
    back = read_eval_log(log.location)
    assert back.samples is not None and len(back.samples) == LIMIT
    for s in back.samples:
        r = mine[str(s.id)]
        assert s.metadata["prompt_sha"] == r["prompt_sha"]
        assert s.metadata["answer"] == r["answer"] and r["answer"]
        assert s.metadata["user_turn"] == r["user_turn"] == s.output.completion
        assert s.messages[-1].role == "user" and s.messages[-1].text == r["user_turn"]
        (verdict,) = r["judgments"]
        assert s.scores is not None
        assert s.scores["rules"].answer == verdict["label"]
        assert s.scores["rules"].value == (1 if verdict["genuine_followup"] else 0)
    (cell,) = json.loads((result.out / "summary.json").read_text())["cells"]
    assert back.results is not None
    (score,) = back.results.scores
    assert score.metrics["mean"].value == pytest.approx(cell["rate"])
