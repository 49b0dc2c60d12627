"""The operability contract, table-driven: every bad input a new user might give ends in
ONE plain line on stderr (no traceback) with exit code 2, and nothing already stored is
lost or changed.

Each case is a command line with placeholders for files made once per module: bad
files, a small real run made with the ``fake:`` backend, and damaged copies of it.
Every case asserts exit 2, exactly one ``error:`` line on stderr (file descriptor level,
so C-library chatter counts too), no ``Traceback``, the expected words, and that the
store row counts (or, for damaged stores, the bytes) of every run are unchanged.

Run: ``.venv/bin/python -m pytest tests/test_bad_inputs.py -q``
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import socket
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from userturn.cli import main

GOOD_ROW = {"id": "a", "messages": [{"role": "user", "content": "What is 2+2?"}]}
CTX = [
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "4."},
]
EXAMPLE = {"id": "e1", "messages": CTX, "user_turn": "Why 4?"}
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
DROPS_USERS = (
    "{% for m in messages %}{% if m['role'] != 'user' %}<|im_start|>{{ m['role'] }}\n"
    "{{ m['content'] }}<|im_end|>\n{% endif %}{% endfor %}"
)


NESTED_LOOP = (
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}" + CHATML
)
"""10^10 iterations of nothing: bounded by the render's time budget."""


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


DEAD = f"http://127.0.0.1:{_closed_port()}/v1"
"""A server address nobody listens on."""
RUN = ["run", "--model", "fake:x", "--limit", "2", "--temperatures", "0", "--judge", "rules"]
"""A run that takes a second; cases add the bad part."""


def label(i: str, genuine: bool | None, lab: str | None, status: str = "ok") -> str:
    row = {"id": i, "genuine_followup": genuine, "label": lab, "rationale": "", "status": status}
    return json.dumps(row) + "\n"


def _jsonl(*rows: object) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def make_files(d: Path) -> None:
    """Every bad (and good) input file the cases refer to, in ``d``."""
    text = {
        "good.jsonl": _jsonl(GOOD_ROW),
        "empty.jsonl": "",
        "blank.jsonl": "\n\n",
        "id_dict.jsonl": _jsonl({**GOOD_ROW, "id": {"x": 1}}),
        "dup_ids.jsonl": _jsonl(GOOD_ROW, GOOD_ROW),
        "empty_id.jsonl": _jsonl({**GOOD_ROW, "id": ""}),
        "blank_id.jsonl": _jsonl({**GOOD_ROW, "id": " \t"}),
        "padded_id.jsonl": _jsonl({**GOOD_ROW, "id": " a"}),
        "comma_id.jsonl": _jsonl({**GOOD_ROW, "id": "a,b"}),
        "ex_dup.jsonl": _jsonl(EXAMPLE, EXAMPLE),
        "ex_dup_int.jsonl": _jsonl({**EXAMPLE, "id": 1}, {**EXAMPLE, "id": "1"}),
        "ex_blank_id.jsonl": _jsonl({**EXAMPLE, "id": "  "}),
        "dup_key.yaml": "models: [fake:x]\nlimit: 2\nlimit: 3\n",
        "limit_true.yaml": "models: [fake:x]\nlimit: true\n",
        "samples_false.yaml": "models: [fake:x]\nsamples: false\n",
        "bad_json.jsonl": _jsonl(GOOD_ROW) + "{not json\n",
        "not_object.jsonl": "[1, 2]\n",
        "bad_role.jsonl": _jsonl({"id": "a", "messages": [{"role": "robot", "content": "x"}]}),
        "no_messages.jsonl": _jsonl({"id": "a"}),
        "ex.jsonl": _jsonl(EXAMPLE),
        "ex_no_turn.jsonl": _jsonl({"id": "e1", "messages": CTX}),
        "ex_list_id.jsonl": _jsonl({**EXAMPLE, "id": [1]}),
        "A.jsonl": label("a", True, "plausible_followup") + label("b", False, "other"),
        "B_disjoint.jsonl": label("c", True, "plausible_followup"),
        "contradict.jsonl": label("a", True, "previous_turn_restate"),
        "bad_status.jsonl": label("a", True, "plausible_followup", status="fine"),
        "bad_label.jsonl": label("a", False, "rude"),
        "empty.yaml": "",
        "comments.yaml": "# nothing here\n",
        "list.yaml": "- models\n",
        "broken.yaml": "a: [\n",
        "typo.yaml": "models: [fake:x]\ntemperture: 1\n",
        "empty.jinja": "",
        "drops_users.jinja": DROPS_USERS,
        "chatml.jinja": CHATML,
        "msgs.json": json.dumps(CTX),
        "msgs_bad.json": "[{",
        "msgs_roles.json": json.dumps([{"role": "user", "content": 3}]),
        "afile": "not a directory\n",
        "type_error.jinja": "{{ messages[0]['content'] + 1 }}",
        "zero_div.jinja": "{% for m in messages %}{{ m['content'] }}{{ 1 // 0 }}{% endfor %}",
        "recursion.jinja": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
        "endless.jinja": NESTED_LOOP,
        "huge_output.jinja": "{% for i in range(100) %}{{ 'x' * 1000000 }}{% endfor %}",
        "huge_string.jinja": "{{ 'x' * 100000000 }}",
        "huge_power.jinja": "{{ 10 ** 100000000 }}",
        "big_range.jinja": "{% for i in range(10000000000) %}{% endfor %}",
        "deep.jinja": "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",
    }
    for name, body in text.items():
        (d / name).write_text(body, encoding="utf-8")
    latin1 = json.dumps(GOOD_ROW).replace("2+2", "caf\u00e9").encode("latin-1")
    (d / "latin1.jsonl").write_bytes(latin1 + b"\n")
    (d / "latin1.yaml").write_bytes(b"models: [caf\xe9]\n")
    (d / "latin1.json").write_bytes(b'[{"role": "user", "content": "caf\xe9"}]')
    (d / "latin1.jinja").write_bytes(b"{{ 'caf\xe9' }}")
    huge = json.dumps({**GOOD_ROW, "pad": "x" * 9_000_000})
    (d / "huge_line.jsonl").write_text(_jsonl(GOOD_ROW) + huge + "\n", encoding="utf-8")
    (d / "subdir").mkdir()
    for version in ("v1", "v2"):  # one dataset name, two contents
        (d / version).mkdir()
        row = {**GOOD_ROW, "messages": [{"role": "user", "content": f"What is 2+2? ({version})"}]}
        (d / version / "items.jsonl").write_text(_jsonl(row), encoding="utf-8")
    make_ggufs(d)


def make_ggufs(d: Path) -> None:
    """Files given as ``llamacpp:PATH`` that are not models: text, random bytes, and the
    embedded GGUF cut short (its header and metadata intact, its tensors not)."""
    from userturn import assets

    (d / "text.gguf").write_text("just some text\n", encoding="utf-8")
    (d / "random.gguf").write_bytes(random.Random(1).randbytes(65536))
    real = assets.fetch(assets.SMOLLM2).read_bytes()
    (d / "truncated.gguf").write_bytes(real[: len(real) // 2])
    (d / "header_only.gguf").write_bytes(real[:4096])


def damage(src: Path, dst: Path, how: str) -> Path:
    """A copy of a finished run with its store or manifest damaged."""
    shutil.copytree(src, dst)
    store = dst / "store.sqlite"
    if how == "zeroed":  # the 100-byte SQLite header wiped
        data = bytearray(store.read_bytes())
        data[:100] = bytes(100)
        store.write_bytes(bytes(data))
    elif how == "garbled":  # random bytes over pages in the middle of the file
        data = bytearray(store.read_bytes())
        mid = len(data) // 2
        noise = random.Random(0).randbytes(4096)
        data[mid - 2048 : mid + 2048] = noise
        data[4096:8192] = noise
        store.write_bytes(bytes(data))
    elif how == "empty":
        store.write_bytes(b"")
    elif how == "manifest":
        (dst / "manifest.yaml").write_text("a: [\n")
    elif how == "no_store":
        store.unlink()
    elif how == "bare":  # zeroed, and no records.jsonl to rebuild it from
        data = bytearray(store.read_bytes())
        data[:100] = bytes(100)
        store.write_bytes(bytes(data))
        (dst / "records.jsonl").unlink()
    return dst


DAMAGED = ("zeroed", "garbled", "empty", "manifest", "no_store", "bare")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Placeholders: ``d`` (files), ``run`` (a real run) and damaged copies of it."""
    root = tmp_path_factory.mktemp("bad_inputs")
    files = root / "files"
    files.mkdir()
    make_files(files)
    run = root / "run"
    assert main([*RUN, "--out", str(run)]) == 0
    data_run = root / "data_run"
    assert main([*RUN, "--dataset", f"jsonl:{files}/v1/items.jsonl", "--out", str(data_run)]) == 0
    places = {"d": files, "run": run, "data_run": data_run, "out": root / "new_out"}
    for how in DAMAGED:
        places[how] = damage(run, root / how, how)
    return places


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    expect: str
    """Words the error line must contain (case-insensitive)."""


def case(name: str, argv: str | list[str], expect: str) -> Case:
    return Case(name, tuple(argv.split() if isinstance(argv, str) else argv), expect)


TEMPLATE_FAULTS = (
    ("type_error", "type_error.jinja: chat template raised TypeError"),
    ("zero_div", "zero_div.jinja: chat template raised ZeroDivisionError"),
    ("recursion", "recursion.jinja: chat template raised RecursionError"),
    ("endless", "endless.jinja: chat template stopped: rendering took longer than"),
    ("huge_output", "huge_output.jinja: chat template stopped: rendering would produce over"),
    ("huge_string", "huge_string.jinja: chat template stopped: rendering would produce over"),
    ("huge_power", "huge_power.jinja: chat template stopped: rendering would produce over"),
    ("big_range", "big_range.jinja: chat template raised OverflowError"),
    ("deep", "deep.jinja: chat template"),
)
"""Templates whose own code fails or runs away, with the words of the line naming each."""

CASES = [
    # spec options: unknown, typed, in range
    case("n_ctx not an int", [*RUN, "--model", "smollm2-135m?n_ctx=abc"], "n_ctx"),
    case("n_threads not an int", [*RUN, "--model", "smollm2-135m?n_threads=abc"], "n_threads"),
    case("n_ctx negative", [*RUN, "--model", "smollm2-135m?n_ctx=-5"], ">= 64"),
    case("unknown model option", [*RUN, "--model", "smollm2-135m?bogus=1"], "valid:"),
    case("empty model option", [*RUN, "--model", "smollm2-135m?k="], "unknown option 'k'"),
    case("garbage dataset options", [*RUN, "--dataset", "gsm8k?&&=="], "has an empty option"),
    case("hf adapter typo", [*RUN, "--model", "hf:X?adaptr=DIR"], "'adaptr'"),
    case("rules option", [*RUN[:-1], "rules?x=1"], "'x' for judge 'rules' (valid:"),
    case("offline option", [*RUN[:-1], "offline?x=1"], "'x' for judge 'offline' (valid:"),
    case("llm judge without model", [*RUN[:-1], "llm:"], "needs a model"),
    case("unknown model", [*RUN, "--model", "nope"], "unknown model 'nope'"),
    case("dead judge server", [*RUN[:-1], f"openai:gpt-x?base_url={DEAD}"], "connection refused"),
    case(
        "dead model server",
        [
            *RUN[:1],
            "--model",
            f"openai:m?base_url={DEAD}",
            *RUN[3:],
            "--chat-template",
            "{d}/chatml.jinja",
        ],
        DEAD,
    ),
    case("unknown dataset", [*RUN, "--dataset", "nope"], "unknown dataset"),
    case("unknown judge", [*RUN[:-1], "nope"], "unknown judge"),
    case("unknown perturbation", [*RUN, "--perturb", "nosuch"], "unknown perturbation"),
    case("truncate fraction", [*RUN, "--perturb", "truncate:abc"], "truncate"),
    # --dry-run validates everything a run would
    case("dry-run unknown model", "run --dry-run --model nope", "unknown model"),
    case("dry-run perturbation", "run --dry-run --perturb nosuch", "unknown perturbation"),
    case("dry-run truncate", "run --dry-run --perturb truncate:abc", "truncate"),
    case("dry-run model option", "run --dry-run --model smollm2-135m?bogus=1", "bogus"),
    case("dry-run inf", "run --dry-run --temperatures inf", "finite"),
    # numbers: range and finiteness, named by the flag
    case("temperature nan", [*RUN[:-4], "--temperatures", "nan"], "finite"),
    case("temperature negative", [*RUN[:-4], "--temperatures=-1"], ">= 0"),
    case("temperature word", [*RUN[:-4], "--temperatures", "0,hot"], "--temperatures"),
    case("limit zero", [*RUN[:3], "--limit", "0"], "--limit"),
    case("limit word", "run --limit x", "--limit"),
    case("samples zero", [*RUN, "--samples", "0"], "--samples"),
    case("sample zero", [*RUN, "--sample", "0"], "--sample"),
    case("max user tokens", [*RUN, "--max-user-tokens", "0"], "--max-user-tokens"),
    case("answer temperature nan", [*RUN, "--answer-temperature", "nan"], "finite"),
    case("top-p above one", [*RUN, "--top-p", "2"], "--top-p"),
    case("workers zero", [*RUN, "--workers", "0"], "--workers"),
    case("executor", [*RUN, "--executor", "gpu"], "--executor"),
    case("history reasoning", [*RUN, "--history-reasoning", "x"], "--history-reasoning"),
    case("system placement", [*RUN, "--system-placement", "x"], "--system-placement"),
    case("template kwargs list", [*RUN, "--chat-template-kwargs", "[1]"], "JSON object"),
    case("template kwargs json", [*RUN, "--chat-template-kwargs", "{{x"], "invalid JSON"),
    case("items empty", [*RUN, "--items", ","], "--items"),
    case("items unknown", [*RUN, "--items", "zz"], "not in"),
    # dataset files
    case("jsonl not UTF-8", [*RUN, "--dataset", "jsonl:{d}/latin1.jsonl"], "utf-8"),
    case("jsonl id object", [*RUN, "--dataset", "jsonl:{d}/id_dict.jsonl"], "field 'id'"),
    case("jsonl duplicate id", [*RUN, "--dataset", "jsonl:{d}/dup_ids.jsonl"], "duplicate"),
    case("jsonl bad JSON", [*RUN, "--dataset", "jsonl:{d}/bad_json.jsonl"], "bad_json.jsonl:2:"),
    case("jsonl empty id", [*RUN, "--dataset", "jsonl:{d}/empty_id.jsonl"], "blank id"),
    case("jsonl blank id", [*RUN, "--dataset", "jsonl:{d}/blank_id.jsonl"], "blank id"),
    case("jsonl padded id", [*RUN, "--dataset", "jsonl:{d}/padded_id.jsonl"], "whitespace"),
    case("jsonl comma id", [*RUN, "--dataset", "jsonl:{d}/comma_id.jsonl"], "comma"),
    case(
        "judge in duplicate id",
        "judge --in {d}/ex_dup.jsonl --judge rules --out {out}/l.jsonl",
        "ex_dup.jsonl:2: field 'id': duplicate",
    ),
    case(
        "judge in duplicate id as number",
        "judge --in {d}/ex_dup_int.jsonl --judge rules --out {out}/l.jsonl",
        "duplicate",
    ),
    case(
        "judge in blank id",
        "judge --in {d}/ex_blank_id.jsonl --judge rules --out {out}/l.jsonl",
        "blank id",
    ),
    case("config duplicate key", "run --config {d}/dup_key.yaml", "dup_key.yaml:3: field 'limit'"),
    case(
        "config limit true", "run --config {d}/limit_true.yaml", "limit_true.yaml:2: field 'limit'"
    ),
    case("config samples false", "run --config {d}/samples_false.yaml", "field 'samples'"),
    case("jsonl not object", [*RUN, "--dataset", "jsonl:{d}/not_object.jsonl"], "JSON object"),
    case("jsonl bad role", [*RUN, "--dataset", "jsonl:{d}/bad_role.jsonl"], "messages[0].role"),
    case("jsonl no messages", [*RUN, "--dataset", "jsonl:{d}/no_messages.jsonl"], "messages"),
    case("jsonl empty", [*RUN, "--dataset", "jsonl:{d}/empty.jsonl"], "no items"),
    case("jsonl blank lines", [*RUN, "--dataset", "jsonl:{d}/blank.jsonl"], "no items"),
    case("jsonl huge line", [*RUN, "--dataset", "jsonl:{d}/huge_line.jsonl"], "huge_line.jsonl:2:"),
    case("jsonl directory", [*RUN, "--dataset", "jsonl:{d}/subdir"], "directory"),
    case("jsonl missing", [*RUN, "--dataset", "jsonl:{d}/nope.jsonl"], "not found"),
    case("gsm8k missing file", [*RUN, "--dataset", "gsm8k:{d}/nope.jsonl"], "not found"),
    case("jsonl no path", [*RUN, "--dataset", "jsonl:"], "jsonl:PATH"),
    # config files
    case("config not UTF-8", "run --config {d}/latin1.yaml", "utf-8"),
    case("config empty", "run --config {d}/empty.yaml", "empty"),
    case("config only comments", "run --config {d}/comments.yaml", "empty"),
    case("config a list", "run --config {d}/list.yaml", "mapping"),
    case("config broken YAML", "run --config {d}/broken.yaml", "invalid YAML"),
    case("config typo", "run --config {d}/typo.yaml", "typo.yaml:2: field 'temperture'"),
    case("config directory", "run --config {d}/subdir", "directory"),
    case("config missing", "run --config {d}/nope.yaml", "not found"),
    # templates and render
    case(
        "render empty template",
        "render --template {d}/empty.jinja --messages {d}/msgs.json",
        "template",
    ),
    case(
        "render template drops users",
        "render --template {d}/drops_users.jinja --messages {d}/msgs.json",
        "user",
    ),
    case(
        "render template not UTF-8",
        "render --template {d}/latin1.jinja --messages {d}/msgs.json",
        "utf-8",
    ),
    case("run template drops users", [*RUN, "--chat-template", "{d}/drops_users.jinja"], "user"),
    *(
        case(
            f"render template {name}",
            f"render --template {{d}}/{name}.jinja --messages {{d}}/msgs.json",
            words,
        )
        for name, words in TEMPLATE_FAULTS
    ),
    *(
        case(f"run template {name}", [*RUN, "--chat-template", f"{{d}}/{name}.jinja"], words)
        for name, words in TEMPLATE_FAULTS
    ),
    case("run template missing", [*RUN, "--chat-template", "{d}/nope.jinja"], "not found"),
    case(
        "render bad date",
        "render --template {d}/chatml.jinja --messages {d}/msgs.json --date 2025-13-45",
        "--date",
    ),
    case(
        "render bad messages JSON",
        "render --template {d}/chatml.jinja --messages {d}/msgs_bad.json",
        "invalid JSON",
    ),
    case(
        "render messages not UTF-8",
        "render --template {d}/chatml.jinja --messages {d}/latin1.json",
        "utf-8",
    ),
    case(
        "render messages content",
        "render --template {d}/chatml.jinja --messages {d}/msgs_roles.json",
        "content",
    ),
    case(
        "render messages directory",
        "render --template {d}/chatml.jinja --messages {d}/subdir",
        "directory",
    ),
    case(
        "render both sources",
        "render --model fake:x --template {d}/chatml.jinja --messages {d}/msgs.json",
        "exactly one",
    ),
    case("render unknown model", "render --model nope --messages {d}/msgs.json", "unknown model"),
    *(
        case(f"{cmd} {name}.gguf", argv.format(name=name), f"{name}.gguf: field 'model'")
        for name in ("text", "random", "truncated", "header_only")
        for cmd, argv in (
            ("run", "run --model llamacpp:{{d}}/{name}.gguf --limit 1 --judge rules"),
            ("dry-run", "run --dry-run --model llamacpp:{{d}}/{name}.gguf"),
            ("render", "render --model llamacpp:{{d}}/{name}.gguf --messages {{d}}/msgs.json"),
        )
    ),
    case("n_ctx over training", [*RUN, "--model", "smollm2-135m?n_ctx=99999999"], "training"),
    case("dry-run n_ctx huge", "run --dry-run --model smollm2-135m?n_ctx=99999999", "8192"),
    # --out of run
    case("out is a file", [*RUN, "--out", "{d}/afile"], "file"),
    case("out under a file", [*RUN, "--out", "{d}/afile/sub"], "afile"),
    case("out in /proc", [*RUN, "--out", "/proc/userturn-x"], "/proc/userturn-x"),
    case("out with other settings", [*RUN, "--seed", "7", "--out", "{run}"], "other settings"),
    # judge --in / --out
    case(
        "judge in not UTF-8",
        "judge --in {d}/latin1.jsonl --judge rules --out {out}/l.jsonl",
        "utf-8",
    ),
    case(
        "judge out is a directory",
        "judge --in {d}/ex.jsonl --judge rules --out {d}/subdir",
        "directory",
    ),
    case(
        "judge out is the input",
        "judge --in {d}/ex.jsonl --judge rules --out {d}/ex.jsonl",
        "input",
    ),
    case("judge out exists", "judge --in {d}/ex.jsonl --judge rules --out {d}/A.jsonl", "--force"),
    case(
        "judge in missing field",
        "judge --in {d}/ex_no_turn.jsonl --judge rules --out {out}/l.jsonl",
        "user_turn",
    ),
    case(
        "judge in list id",
        "judge --in {d}/ex_list_id.jsonl --judge rules --out {out}/l.jsonl",
        "field 'id'",
    ),
    case(
        "judge in empty",
        "judge --in {d}/empty.jsonl --judge rules --out {out}/l.jsonl",
        "no examples",
    ),
    case(
        "judge in directory", "judge --in {d}/subdir --judge rules --out {out}/l.jsonl", "directory"
    ),
    case("judge in and run", "judge --in {d}/ex.jsonl --run {run} --judge rules", "exactly one"),
    case("judge no judge", "judge --in {d}/ex.jsonl --out {out}/l.jsonl", "--judge"),
    case("judge run unknown judge", "judge --run {run} --judge nope", "unknown judge"),
    # agree
    case("agree not UTF-8", "agree {d}/latin1.jsonl {d}/A.jsonl", "utf-8"),
    case("agree no shared ids", "agree {d}/A.jsonl {d}/B_disjoint.jsonl", "no id"),
    case("agree empty file", "agree {d}/A.jsonl {d}/empty.jsonl", "empty"),
    case("agree bootstrap negative", "agree {d}/A.jsonl {d}/A.jsonl --bootstrap -5", "--bootstrap"),
    case("agree contradiction", "agree {d}/contradict.jsonl {d}/A.jsonl", "contradicts"),
    case("agree bad status", "agree {d}/bad_status.jsonl {d}/A.jsonl", "status"),
    case("agree bad label", "agree {d}/bad_label.jsonl {d}/A.jsonl", "label"),
    case("agree directory", "agree {d}/subdir {d}/A.jsonl", "directory"),
    case("agree one file", "agree {d}/A.jsonl", "two label files"),
    case("agree run without judges", "agree --run {run}", "--judges"),
    # export, report, compare, repair on good and damaged runs
    case("export to /proc", "export labels --run {run} --judge rules --out /proc/x.jsonl", "/proc"),
    case(
        "export unknown judge",
        "export labels --run {run} --judge nope --out {out}/x.jsonl",
        "no judgments",
    ),
    case(
        "export over its run",
        "export labels --run {run} --judge rules --out {run}/records.jsonl",
        "records.jsonl",
    ),
    case("report zeroed store", "report --run {zeroed}", "recover"),
    case("run zeroed store", [*RUN, "--out", "{zeroed}"], "recover"),
    case("judge zeroed store", "judge --run {zeroed} --judge rules", "recover"),
    case(
        "export zeroed store",
        "export labels --run {zeroed} --judge rules --out {out}/z.jsonl",
        "recover",
    ),
    case("compare zeroed store", "compare {zeroed} {run}", "recover"),
    case("report garbled store", "report --run {garbled}", "recover"),
    case("run garbled store", [*RUN, "--out", "{garbled}"], "recover"),
    case("compare garbled store", "compare {run} {garbled}", "recover"),
    case("agree garbled store", "agree --run {garbled} --judges rules,offline", "recover"),
    case("report empty store", "report --run {empty}", "recover"),
    case("run empty store", [*RUN, "--out", "{empty}"], "recover"),
    case("report broken manifest", "report --run {manifest}", "manifest.yaml"),
    case("report no store", "report --run {no_store}", "recover"),
    case("report not a run", "report --run {d}", "not a run directory"),
    case("report missing run", "report --run {d}/nope", "not found"),
    case(
        "report negative transcripts",
        "report --run {run} --max-transcripts -1",
        "--max-transcripts",
    ),
    case("compare missing run", "compare {run} {d}/nope", "not found"),
    case("recover not a run", "recover --run {d}", "records.jsonl"),
    case("rescore zeroed store", "rescore --run {zeroed}", "recover"),
    case("report zeroed store, no records", "report --run {bare}", "no records.jsonl to rebuild"),
    case("judge zeroed store, no records", "judge --run {bare} --judge rules", "move it aside"),
    case(
        "dataset changed under its name",
        [*RUN, "--dataset", "jsonl:{d}/v2/items.jsonl", "--out", "{data_run}"],
        "is not the data this run was made with",
    ),
    # data and annotate
    case("data pull unknown", "data pull nosuch", "unknown dataset"),
    case(
        "annotate sampling",
        "annotate export --run {run} --out {out}/p --sampling bogus",
        "--sampling",
    ),
    case(
        "annotate disagreement one judge",
        "annotate export --run {run} --out {out}/p --sampling disagreement",
        "two judges",
    ),
    case("annotate zeroed store", "annotate export --run {zeroed} --out {out}/p", "recover"),
    case("no such command", "frobnicate", "frobnicate"),
    case("no such flag", "run --frobnicate", "--frobnicate"),
]


def _fill(argv: tuple[str, ...], env: dict[str, Path]) -> list[str]:
    places = {k: str(v) for k, v in env.items()}
    return [a.format(**places) for a in argv]


def _counts(store: Path) -> dict[str, int]:
    with sqlite3.connect(store) as conn:
        tables = ("answers", "user_turns", "judgments", "configs")
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables}


def _state(env: dict[str, Path]) -> dict[str, object]:
    """Row counts of the readable stores; bytes of every file of the damaged ones (a
    readable store may rewrite its header on open, a damaged one must stay as it is)."""
    out: dict[str, object] = {
        "run": _counts(env["run"] / "store.sqlite"),
        "data_run": _counts(env["data_run"] / "store.sqlite"),
        "manifest": _counts(env["manifest"] / "store.sqlite"),
    }
    for name in DAMAGED:
        for f in sorted(env[name].iterdir()):
            if f.is_file() and not (name == "manifest" and f.name.startswith("store.")):
                out[f"{name}/{f.name}"] = hashlib.sha256(f.read_bytes()).hexdigest()
    out["files"] = sorted(p.name for p in env["d"].iterdir())
    return out


@pytest.mark.parametrize("c", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_line(
    c: Case, env: dict[str, Path], capfd: pytest.CaptureFixture[str]
) -> None:
    before = _state(env)
    capfd.readouterr()
    code = main(_fill(c.argv, env))
    err = capfd.readouterr().err
    # a run that failed after it started may have logged progress lines first: not errors
    lines = [x for x in err.strip().splitlines() if not x.startswith("progress ")]
    assert "Traceback" not in err, err
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, err)
    assert c.expect.lower() in lines[0].lower(), lines[0]
    assert _state(env) == before
    assert not env["out"].exists(), "a failed command left its output behind"
    assert not list(Path.cwd().iterdir()), "a failed command left files in the working directory"


def test_the_table_is_big_enough() -> None:
    assert len(CASES) >= 40 and len({c.name for c in CASES}) == len(CASES)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only directory")
def test_read_only_out(
    env: dict[str, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        assert main([*RUN, "--out", str(ro / "run")]) == 2
        err = capfd.readouterr().err.strip()
        assert "not writable" in err and "\n" not in err
    finally:
        ro.chmod(0o755)


def test_fake_script_with_braces_runs(tmp_path: Path) -> None:
    """A scripted reply may hold JSON or code: only ``{seed}`` is a placeholder."""
    script = tmp_path / "script.json"
    reply = 'Can you show it as {"total": 4}? (seed {seed})'
    script.write_text(json.dumps({"user": [reply]}), encoding="utf-8")
    out = tmp_path / "run"
    argv = [*RUN[:2], f"fake:x?script={script}", *RUN[3:], "--out", str(out)]
    assert main(argv) == 0
    rows = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert rows and all(r["user_turn"].startswith('Can you show it as {"total": 4}?') for r in rows)
    assert all(r["user_turn"].endswith(f"(seed {r['seed']})") for r in rows)
