"""``userturn report --run DIR``: tables, plots and one self-contained ``report.html``.

Writes ``DIR/report/``:
- ``tables/<name>.md|csv|tex`` (tables.py), ``plots/<name>.png|svg`` (plots.py);
- ``analysis.json``: every number the report shows, for scripts;
- ``report.html``: a headline block (headline.py), the tables, the plots the run has
  data for as PNG data URIs, and a transcript browser (records embedded as JSON,
  rendered with ``textContent`` so model outputs full of ``<tags>`` can never inject
  markup). The browser shows each context once with its samples under it; rollouts as
  one conversation with a verdict per model-written turn; likelihood contexts with their
  scored candidates. No external URL is referenced, so it opens offline and can be
  mailed as one file.
"""

from __future__ import annotations

import base64
import json
import logging
from dataclasses import dataclass
from importlib import resources
from itertools import islice
from pathlib import Path
from typing import Any

import yaml
from jinja2 import Environment, StrictUndefined
from markupsafe import Markup, escape

import userturn
from userturn.analysis.cell import JudgedCell, LikelihoodCell
from userturn.analysis.tables import Table, all_tables
from userturn.analysis.views import Analysis, analyze
from userturn.errors import UserError, read_text
from userturn.redact import redact
from userturn.report.headline import headlines
from userturn.run.outputs import write_json
from userturn.rundir.lines import iter_records, line_record
from userturn.rundir.records import LikelihoodRecord
from userturn.rundir.store import open_run

log = logging.getLogger(__name__)

DEFAULT_MAX_TRANSCRIPTS = 5000
CAPTIONS = {
    "rate_vs_temperature": "Genuine follow-up rate vs user-turn temperature, per model, "
    "with 95% CI bands (no perturbation).",
    "accuracy_vs_followup": "Task accuracy vs follow-up rate per (model, dataset), at the "
    "lowest and highest temperature.",
    "failure_labels": "Label shares per model over all cells (unparseable in black).",
    "perturbation_deltas": "Rate with a perturbation minus the rate without, with paired "
    "95% CIs over items.",
    "gf_at_k": "GF@k: the chance that at least one of k samples of a context is genuine.",
    "item_spread": "Per-item genuine rates at the highest temperature: is awareness spread "
    "thin over many items or concentrated in a few?",
    "rollout_turns": "Rollouts: the genuine rate at each user turn, and the share of "
    "conversations still genuine at every turn so far.",
    "likelihood": "Likelihood probe: how often the real next user turn outscores every "
    "degenerate candidate, and by how much (mean per-token log-likelihood; the secondary "
    "ranking, see the likelihood table for answer PMI and role contrast).",
}
KEEP = (
    "id",
    "item_id",
    "model",
    "config",
    "dataset",
    "temperature",
    "sample",
    "perturbation",
    "messages",
    "answer",
    "user_turn",
    "user_finish",
    "reference_turn",
    "judgments",
    "probe",
    "turn",
    "candidates",
    "prefers_real",
    "margin",
    "counterfactuals",
    "pmi_real",
    "pmi_unrelated",
    "role_real",
    "role_opening",
    "excluded",
)


@dataclass(frozen=True)
class Report:
    folder: Path
    html: Path
    tables: list[Path]
    plots: list[Path]
    judge: str | None
    transcripts: int
    records: int
    judge_text: str
    """The judge as the report names it (a likelihood run needs none)."""


def pick_judge(a: Analysis, run_dir: Path, judge: str | None) -> str | None:
    """The judge the report is about: ``--judge``, else the first configured one."""
    present = a.judges
    if judge is not None:
        if judge not in present:
            raise UserError(
                f"judge {judge!r} not in this run (have: "
                f"{', '.join(str(j) for j in present) or 'none'})",
                field="judge",
            )
        return judge
    configured = read_manifest(run_dir).get("config", {}).get("judges") or []
    for j in configured:
        if j in present:
            return str(j)
    # likelihood cells carry no judge: a run with judged turns is about their judge
    judged = [j for j in present if j is not None]
    return judged[0] if judged else None


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The run's manifest, or {} when there is none; a damaged one is a one-line error."""
    path = run_dir / "manifest.yaml"
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(read_text(path, "manifest"))
    except yaml.YAMLError as exc:
        raise UserError(
            "manifest.yaml is not valid YAML; rewrite it by re-running the same "
            "`userturn run` command (nothing is regenerated)",
            file=str(path),
        ) from exc
    return data if isinstance(data, dict) else {}


def _meta(run_dir: Path, a: Analysis, n_records: int) -> list[tuple[str, str]]:
    m = read_manifest(run_dir)
    cfg = m.get("config", {})
    rows = [
        ("models", ", ".join(dict.fromkeys(c.model for c in a.cells))),
        ("datasets", ", ".join(dict.fromkeys(c.dataset for c in a.cells))),
        ("configs", ", ".join(a.configs)),
        ("records (user turns and likelihood contexts)", str(n_records)),
        ("cells", str(len(a.cells))),
        ("unparseable + errored judgments", str(sum(c.failed for c in _judged(a)))),
    ]
    # the likelihood probe samples no user turn and calls no judge: those settings of
    # its config are unused, and listing them (judges: ["offline"]) would mislead
    unused = {"temperatures", "samples", "judges", "max_user_tokens"}
    likelihood_only = bool(a.cells) and all(isinstance(c, LikelihoodCell) for c in a.cells)
    for key in (
        "temperatures",
        "samples",
        "perturbations",
        "judges",
        "limit",
        "max_answer_tokens",
        "max_user_tokens",
        "seed",
    ):
        if key in cfg and not (likelihood_only and key in unused):
            rows.append((key, json.dumps(cfg[key], ensure_ascii=False)))
    if "frozen_date" in m:
        rows.append(("frozen date", str(m["frozen_date"])))
    return rows


def _slim(rec: dict[str, Any]) -> dict[str, Any]:
    out = {k: rec.get(k) for k in KEEP}
    out["messages"] = [
        {"role": str(m.get("role")), "content": _text(m.get("content"))}
        for m in rec.get("messages") or []
    ]
    return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)


def script_json(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``</script>``, no ``<!--``."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for ch, esc in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(ch, esc)
    return text


def wbr(text: Any) -> Markup:
    """Escaped text with a line-break opportunity after each ``_``: label names as column
    headers then wrap at their words, and a table of eight labels fits a narrow page."""
    return Markup(str(escape(str(text))).replace("_", "_<wbr>"))


def _render(context: dict[str, Any]) -> str:
    source = resources.files("userturn.report").joinpath("template.html").read_text("utf-8")
    env = Environment(autoescape=True, undefined=StrictUndefined)
    env.filters["wbr"] = wbr
    return env.from_string(source).render(**context)


def build_report(
    run_dir: Path, judge: str | None = None, max_transcripts: int = DEFAULT_MAX_TRANSCRIPTS
) -> Report:
    """Analyse a run and write ``run_dir/report/`` (tables, plots, report.html)."""
    from userturn.analysis import plots as plotting  # matplotlib is heavy; import on use

    with open_run(run_dir) as store:
        a = analyze(store)
        total = store.count_user_turns() + _count_likelihood(store)
        records = [_slim(r) for r in islice(iter_records(store), max_transcripts)]
    judge = pick_judge(a, run_dir, judge)
    folder = run_dir / "report"
    # a table with no rows (say the likelihood table of a generation run) is left out
    tables = [t for t in all_tables(a, judge) if t.rows]
    table_paths = [p for t in tables for p in t.write(folder / "tables")]
    figs = plotting.write_plots(a, judge, folder / "plots")
    write_json(folder / "analysis.json", {"judge": judge, **a.to_json()})
    html = folder / "report.html"
    page = _render(_context(run_dir, a, judge, tables, figs, records, total))
    html.write_text(redact(page), encoding="utf-8")  # shareable: no credentials in URLs
    log.info("wrote %s", html)
    return Report(
        folder,
        html,
        table_paths,
        [p for d in figs.values() for p in d.values()],
        judge,
        len(records),
        total,
        judge_text(a, judge),
    )


def _judged(a: Analysis) -> list[JudgedCell]:
    return [c for c in a.cells if isinstance(c, JudgedCell)]


def _count_likelihood(store: Any) -> int:
    return sum(1 for r in iter_records(store) if line_record(r) is LikelihoodRecord)


def _probes(a: Analysis) -> list[str]:
    return list(dict.fromkeys(c.probe for c in a.cells))


def judge_text(a: Analysis, judge: str | None) -> str:
    """What the report says about its judge: the likelihood probe has none by design, so
    it must not be told to run one."""
    if judge is not None:
        return judge
    if a.cells and all(isinstance(c, LikelihoodCell) for c in a.cells):
        return "none needed (likelihood probe: scored by the model's own log-likelihoods)"
    return "none (no judgments yet: userturn judge --run DIR --judge SPEC)"


def _context(
    run_dir: Path,
    a: Analysis,
    judge: str | None,
    tables: list[Table],
    figs: dict[str, dict[str, Path]],
    embedded: list[dict[str, Any]],
    total: int,
) -> dict[str, Any]:
    note = (
        f"All {total} user turns and contexts are embedded."
        if len(embedded) == total
        else f"The first {len(embedded)} of {total} user turns and contexts (store order) are "
        "embedded; all of them are in records.jsonl (raise --max-transcripts)."
    )
    plots = [
        {
            "name": name,
            "caption": CAPTIONS.get(name, name),
            "png_b64": base64.b64encode(paths["png"].read_bytes()).decode("ascii"),
        }
        for name, paths in figs.items()
    ]
    return {
        "title": run_dir.resolve().name,
        "version": userturn.__version__,
        "run_dir": str(run_dir),
        "judge": judge_text(a, judge),
        "headlines": headlines(a, judge),
        "probes": _probes(a),
        "meta": _meta(run_dir, a, total),
        "tables": tables,
        "plots": plots,
        "transcript_note": note,
        "records_json": script_json(embedded),
    }
