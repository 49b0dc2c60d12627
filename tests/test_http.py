"""The shared OpenAI-SDK client: retries, Retry-After, AIMD, keys, prices.

Runs against tests/fault_server.py on 127.0.0.1 (no model). ~15 s:
``.venv/bin/python -m pytest tests/test_http.py -q``
"""

from __future__ import annotations

import email.utils
import json
import logging
import time
from pathlib import Path

import pytest

from fault_server import FaultServer
from userturn.errors import UserError
from userturn.http import (
    AdaptiveLimiter,
    OpenAIClient,
    Price,
    load_prices,
    price_for,
    resolve_api_key,
    retry_after,
)

FAST = {"backoff": "0.01", "timeout": "1"}


def _chat(client: OpenAIClient, text: str) -> object:
    return client.request("chat", messages=[{"role": "user", "content": text}], max_tokens=8)


@pytest.fixture
def server():
    with FaultServer(retry_after="1", timeout_sleep=2.0, lifetime=120) as srv:
        yield srv


def client_for(srv: FaultServer, **opts: str) -> OpenAIClient:
    return OpenAIClient("fault-model", {**FAST, **opts}, base_url=srv.base_url)


def test_retry_after_forms() -> None:
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < (retry_after({"retry-after": future}) or 0) <= 31
    assert retry_after({}) is None


def test_429_waits_for_retry_after(server: FaultServer) -> None:
    client = client_for(server)
    res = _chat(client, "[[fault:429,ok]] a")
    assert res.ok and res.attempts == 2
    first, second = [h for h in server.hits]
    assert second.at - first.at >= 0.95, "Retry-After: 1 was not honoured"
    assert client.usage.throttled == 1 and client.usage.retries == 1
    assert client.limiter.limit == client.concurrency // 2  # AIMD cut on 429


def test_5xx_timeouts_and_garbage_are_retried_then_succeed(server: FaultServer) -> None:
    client = client_for(server)
    res = _chat(client, "[[fault:500,timeout,garbage,ok]] b")
    assert res.ok and res.attempts == 4
    assert client.limiter.limit == client.concurrency  # not a rate limit: no cut


def test_retries_are_bounded_and_separate_for_429(server: FaultServer) -> None:
    client = client_for(server, max_retries="2", rate_limit_retries="3")
    server.state.retry_after = "0"
    res = _chat(client, "[[fault:500]] c")
    assert not res.ok and res.status_code == 500 and res.attempts == 3
    res = _chat(client, "[[fault:429]] d")
    assert not res.ok and res.status_code == 429 and res.attempts == 4
    res = _chat(client, "[[fault:400]] e")  # a client error is not retried
    assert not res.ok and res.status_code == 400 and res.attempts == 1


def test_auth_failure_stops_with_user_error(server: FaultServer) -> None:
    with pytest.raises(UserError, match="refused the key"):
        _chat(client_for(server), "[[fault:401]] f")


def test_key_is_never_logged_or_described(
    server: FaultServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "sk-test-very-secret-123"
    monkeypatch.setenv("MY_KEY", secret)
    caplog.set_level(logging.DEBUG)
    client = client_for(server, api_key_env="MY_KEY", max_retries="1")
    _chat(client, "[[fault:500]] g")
    assert secret not in caplog.text
    assert secret not in json.dumps(client.describe())
    assert client.describe()["api_key_env"] == "MY_KEY"


def test_key_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("NOPE", raising=False)
    assert resolve_api_key({}, "http://127.0.0.1:8000/v1") == "EMPTY"
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        resolve_api_key({}, "https://api.example.com/v1")
    with pytest.raises(UserError, match="NOPE"):
        resolve_api_key({"api_key_env": "NOPE"}, None)
    monkeypatch.setenv("OPENAI_API_KEY", "k1")
    assert resolve_api_key({}, None) == "k1"


def test_usage_and_cost_per_call(server: FaultServer) -> None:
    client = client_for(server, price_in="1.5", price_out="6")
    res = _chat(client, "[[fault:ok]] h")
    u = res.usage
    assert u["prompt_tokens"] > 0 and u["completion_tokens"] == 20
    assert u["cost_usd"] == pytest.approx((u["prompt_tokens"] * 1.5 + 20 * 6) / 1e6)
    assert client.usage.cost_usd == pytest.approx(u["cost_usd"])


def test_price_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = tmp_path / "prices.yaml"
    table.write_text("gpt-x:\n  input: 0.25\n  output: 2.0\n")
    assert load_prices({"USERTURN_PRICES": str(table)}) == {"gpt-x": Price(0.25, 2.0)}
    assert load_prices({"USERTURN_PRICES": '{"m": {"input": 1, "output": 2}}'}) == {
        "m": Price(1.0, 2.0)
    }
    monkeypatch.setenv("USERTURN_PRICES", str(table))
    assert price_for("gpt-x", {}) == Price(0.25, 2.0)
    assert price_for("unknown", {}) is None  # no guessed prices
    with pytest.raises(UserError, match="price table"):
        load_prices({"USERTURN_PRICES": '{"m": 3}'})


def test_limiter_halves_once_per_burst_and_grows_back() -> None:
    lim = AdaptiveLimiter(8, cooldown=60)
    for _ in range(3):  # a burst of concurrent 429s is one signal
        lim.acquire()
    for _ in range(3):
        lim.release(throttled=True)
    assert lim.limit == 4
    for _ in range(4):
        lim.acquire()
        lim.release()
    assert lim.limit == 5


def test_map_keeps_input_order(server: FaultServer) -> None:
    client = client_for(server, concurrency="8")
    texts = [f"[[fault:{'500,ok' if i % 3 == 0 else 'ok'}]] item {i}" for i in range(20)]
    results = client.map(lambda t: (t, _chat(client, t)), texts)
    assert [t for t, _ in results] == texts
    assert all(r.ok for _, r in results)
