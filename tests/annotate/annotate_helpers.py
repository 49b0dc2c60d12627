"""Helpers for the annotation tests: runs whose every hidden field carries a marker.

``build_store_run`` writes a run directory with the Store API (fast; every field an
annotator must not see holds a unique ``zqx…`` marker), ``add_second_judge`` adds a judge
that disagrees on some records, ``ITEMS`` are held-out conversations for a real pipeline
run, and ``Server`` runs ``userturn annotate serve`` in a subprocess. Imported by the test
modules in this folder and by its conftest (no tests here).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from userturn.rundir.records import AnswerRecord, UserTurnRecord
from userturn.rundir.store import STORE_NAME, Store
from userturn.types import Judgment

MARKERS = (
    "zqxMODELMARK",
    "zqxDATAMARK",
    "zqxITEMMARK",
    "zqxREFMARK",
    "zqxJUDGEMARK",
    "zqxRATIONALEMARK",
    "zqxPERTMARK",
    "zqxSHAMARK",
    "zqxREASONMARK",
    "zqxFAMILYMARK",
    "987654321",
    "0.731",
)
"""Strings that appear only in fields an annotator must never see."""

SECOND_JUDGE = "llm:openai:zqxJUDGEMARK"
TRICKY = 'Is <script>alert("x")</script> safe? {{ 7*7 }} <b>bold</b> & &amp;'


def _context(i: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"Question {i}: {TRICKY}"},
        {
            "role": "assistant",
            "content": f"Answer {i}: use <code>|e</code> on {{{{ x }}}}.",
            "reasoning_content": "zqxREASONMARK hidden thoughts",
        },
    ]


def build_store_run(
    run_dir: Path, n_items: int = 6, samples: int = 2, flip_every: int = 3
) -> list[str]:
    """A run of ``n_items * samples`` user turns, judged by ``rules`` and SECOND_JUDGE.

    The second judge flips σ on every ``flip_every``-th record, so those are the
    disagreements. Returns the record ids (user-turn keys) in store order.
    """
    store = Store(run_dir / STORE_NAME)
    keys = []
    try:
        for i in range(n_items):
            item, akey = f"zqxITEMMARK-{i}", f"answer-{i}"
            store.put_answer(
                AnswerRecord(
                    key=akey,
                    item_id=item,
                    dataset="jsonl:zqxDATAMARK.jsonl",
                    model="zqxMODELMARK",
                    config="zqxCONFIGMARK",
                    text=f"Answer {i}",
                    final=f"Answer {i}",
                    finish="stop",
                    reasoning="zqxREASONMARK",
                )
            )
            for s in range(samples):
                key = f"{i:04d}{s:04d}" + "f" * 24
                store.put_user_turn(
                    UserTurnRecord(
                        key=key,
                        answer_key=akey,
                        item_id=item,
                        model="zqxMODELMARK",
                        dataset="jsonl:zqxDATAMARK.jsonl",
                        config="zqxCONFIGMARK",
                        temperature=0.731,
                        sample=s,
                        seed=987654321,
                        perturbation="append-question:zqxPERTMARK",
                        messages=tuple(_context(i)),
                        user_turn=f"Why {i}.{s}? <i>{{{{ y }}}}</i>",
                        user_finish="stop",
                        family="zqxFAMILYMARK",
                        prompt_sha="zqxSHAMARK-p",
                        template_sha="zqxSHAMARK-t",
                        reference_turn="zqxREFMARK real next turn",
                    )
                )
                keys.append(key)
        for n, key in enumerate(keys):
            put_judgment(store, key, "rules", n % 2 == 0)
        add_second_judge(store, flip_every)
    finally:
        store.close()
    return keys


def add_second_judge(store: Store, flip_every: int = 3) -> None:
    """SECOND_JUDGE copies the rules judge's σ, flipped on every ``flip_every``-th record."""
    judged = store.judgments()
    for n, row in enumerate(store.user_turns()):
        rules = next(j for j in judged[row.key] if j.judge == "rules")
        put_judgment(store, row.key, SECOND_JUDGE, bool(rules.genuine) != (n % flip_every == 0))


def put_judgment(store: Store, key: str, judge: str, genuine: bool) -> None:
    label = "plausible_followup" if genuine else "previous_turn_restate"
    store.put_judgment(key, Judgment(judge, genuine, label, f"zqxRATIONALEMARK by {judge}"))


ITEMS = [
    {
        "id": "zqxITEMMARK-1",
        "reference_turn": "zqxREFMARK what about autoescape?",
        "messages": [
            {
                "role": "user",
                "content": "How do I print <script>alert(1)</script> and "
                "{{ user.name }} literally in Jinja?",
            },
            {
                "role": "assistant",
                "content": "Wrap it in {% raw %}…{% endraw %}; <b> then stays <b>.",
            },
        ],
    },
    {
        "id": "zqxITEMMARK-2",
        "reference_turn": "zqxREFMARK and 7*7?",
        "messages": [
            {"role": "user", "content": "What is 7*6?"},
            {"role": "assistant", "content": "7*6 = 42."},
        ],
    },
    {
        "id": "zqxITEMMARK-3",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Name a prime above 10."},
            {"role": "assistant", "content": "11 is prime."},
        ],
    },
]
"""Held-out conversations (ending in the assistant turn: no answer stage to pay for)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"{url} not up after {timeout}s")


class Server:
    """``userturn annotate serve PACKET`` on a free 127.0.0.1 port, in a subprocess.

    ``kill()`` sends SIGKILL (a crash, not a clean shutdown); ``start()`` restarts it on
    the same port, so a browser page can simply reload.
    """

    def __init__(self, packet: Path) -> None:
        self.packet = packet
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> str:
        cmd = [
            sys.executable,
            "-m",
            "userturn",
            "annotate",
            "serve",
            str(self.packet),
            "--port",
            str(self.port),
        ]
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        wait_http(self.url + "/api/packet", self.proc)
        return self.url

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None
