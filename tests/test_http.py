"""The shared OpenAI-SDK client: retries, Retry-After, AIMD, keys, prices, connection
errors in words, the startup probe and fingerprint, and request-shape detection.

Runs against tests/fault_server.py and dead or silent sockets on 127.0.0.1 (no model).
~20 s: ``.venv/bin/python -m pytest tests/test_http.py -q``
"""

from __future__ import annotations

import email.utils
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fault_server import FaultServer
from userturn.errors import UserError
from userturn.http import (
    AdaptiveLimiter,
    CallResult,
    FinalIf,
    HTTPOptions,
    OpenAIClient,
    Price,
    ShapeBook,
    ShapeDetector,
    http_options,
    load_prices,
    price_for,
    refuses,
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
    return OpenAIClient("fault-model", http_options({**FAST, **opts}), base_url=srv.base_url)


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
    assert resolve_api_key(HTTPOptions(), "http://127.0.0.1:8000/v1") == "EMPTY"
    with pytest.raises(UserError, match="OPENAI_API_KEY"):
        resolve_api_key(HTTPOptions(), "https://api.example.com/v1")
    with pytest.raises(UserError, match="NOPE"):
        resolve_api_key(HTTPOptions(api_key_env="NOPE"), None)
    monkeypatch.setenv("OPENAI_API_KEY", "k1")
    assert resolve_api_key(HTTPOptions(), None) == "k1"


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
    assert price_for("gpt-x", HTTPOptions()) == Price(0.25, 2.0)
    assert price_for("unknown", HTTPOptions()) is None  # no guessed prices
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


# connection errors --------------------------------------------------------------------
def dead_url() -> str:
    """A local port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A socket that accepts connections and never answers: every request times out."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def test_connection_errors_name_the_url_and_the_cause(silent_url: str) -> None:
    opts = {**FAST, "max_retries": "0", "timeout": "0.3"}
    url = dead_url()
    res = _chat(OpenAIClient("m", http_options(opts), base_url=url), "x")
    assert res.error == f"cannot reach {url}: connection refused"
    res = _chat(OpenAIClient("m", http_options(opts), base_url=silent_url), "x")
    assert res.error == f"cannot reach {silent_url}: timed out after 0.3 s"
    dns = "http://no-such-host.invalid/v1"
    res = _chat(OpenAIClient("m", http_options({**opts, "api_key_env": "HOME"}), base_url=dns), "x")
    assert res.error is not None and res.error.startswith(
        f"cannot reach {dns}: cannot resolve host"
    )


def test_dead_server_fails_the_probe_once_with_one_line(caplog: pytest.LogCaptureFixture) -> None:
    url = dead_url()
    caplog.set_level(logging.WARNING)
    client = OpenAIClient("m", http_options(FAST), base_url=url)
    for _ in range(2):  # the outcome is kept: no second attempt, same error
        with pytest.raises(UserError, match=f"cannot reach {url}: connection refused") as err:
            client.fingerprint()
        assert str(err.value) == f"field 'base_url': cannot reach {url}: connection refused"
    assert not caplog.records


def test_the_same_failure_warns_once_per_server(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="userturn.http")
    client = OpenAIClient(
        "warn-once", http_options({**FAST, "max_retries": "0"}), base_url=dead_url()
    )
    for i in range(4):
        assert not _chat(client, f"item {i}").ok
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "connection refused" in warnings[0].getMessage()
    assert sum("giving up" in r.getMessage() for r in caplog.records) == 4  # rest at debug


# identity -----------------------------------------------------------------------------
def test_fingerprint_follows_server_name_and_metadata_not_restarts() -> None:
    with FaultServer(lifetime=60) as srv:
        srv.state.models = [
            {"id": "fault-model", "root": "/ckpt/a", "max_model_len": 4096},
            {"id": "other", "root": "/ckpt/b"},
        ]
        first = client_for(srv).fingerprint()
        again = client_for(srv).fingerprint()  # a new GET: a new "created" stamp
        other_name = OpenAIClient("other", http_options(FAST), base_url=srv.base_url).fingerprint()
        elsewhere = OpenAIClient(
            "fault-model",
            http_options(FAST),
            base_url=srv.base_url.replace("127.0.0.1", "localhost"),
        ).fingerprint()
        srv.state.models[0] = {"id": "fault-model", "root": "/ckpt/a2", "max_model_len": 4096}
        new_checkpoint = client_for(srv).fingerprint()
        entry = client_for(srv).server_entry()
    assert first == again
    assert len({first, other_name, elsewhere, new_checkpoint}) == 4
    assert entry is not None and entry["root"] == "/ckpt/a2"


def test_a_server_without_models_route_still_has_a_fingerprint() -> None:
    with FaultServer(lifetime=60) as srv:
        srv.state.models = []
        client = client_for(srv)
        assert client.server_entry() is None
        assert client.fingerprint() == client_for(srv).fingerprint()


# request shapes -----------------------------------------------------------------------
def test_refuses_reads_error_param_first() -> None:
    def failure(status: int, body: str) -> CallResult:
        return CallResult(error="x", status_code=status, body=body)

    named = json.dumps({"error": {"message": "bad max_tokens, temperature", "param": "max_tokens"}})
    assert refuses(failure(400, named), "max_tokens")
    assert not refuses(failure(400, named), "temperature")  # the param says which
    text = "Unrecognized request argument supplied: skip_special_tokens"
    assert refuses(failure(400, text), "skip_special_tokens")
    assert not refuses(failure(503, text), "skip_special_tokens")  # an accident, not an answer


def test_shape_detector_finds_the_shape_once_while_others_wait() -> None:
    """Pure: a fake server that refuses shape 0 and 1, counted across 8 threads."""
    seen: list[int] = []
    lock = threading.Lock()

    def adapt(shape: int, failure: CallResult) -> int | None:
        return shape + 1 if failure.status_code == 400 and shape < 2 else None

    def send(shape: int, final_if: FinalIf) -> CallResult:
        with lock:
            seen.append(shape)
        time.sleep(0.01)
        if shape < 2:
            refused = CallResult(error="HTTP 400", status_code=400)
            assert final_if(refused)  # a refusal returns at once, unretried
            return refused
        return CallResult(response={"choices": [{}]})

    detector = ShapeDetector(("test", "srv", "m"), 0, adapt, ShapeBook())
    threads = [threading.Thread(target=detector.call, args=(send,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [0, 1] + [2] * 8 and detector.shape == 2


# deadline and credentials ------------------------------------------------------------
@pytest.mark.timeout(60)  # a hang guard: per-read timeouts would let the drip run ~15 min
def test_timeout_is_a_deadline_not_a_per_read_limit() -> None:
    with FaultServer(lifetime=120, drip_interval=0.2) as srv:
        client = client_for(srv, timeout="1", max_retries="0")
        res = _chat(client, "[[fault:drip]] slow")
        client.close()
    assert res.error == f"cannot reach {srv.base_url}: timed out after 1 s"
    assert res.attempts == 1


def test_credentials_in_the_base_url_are_masked_in_messages_and_describe(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "sk-planted-7f3a"
    caplog.set_level(logging.DEBUG)
    url = dead_url().replace("http://", f"http://alice:{secret}@")
    client = OpenAIClient("m", http_options({**FAST, "max_retries": "0"}), base_url=url)
    res = _chat(client, "x")
    with pytest.raises(UserError) as err:
        client.fingerprint()
    shown = [res.error or "", res.body, str(err.value), caplog.text, json.dumps(client.describe())]
    assert all(secret not in text for text in shown)
    assert "http://***@127.0.0.1" in (res.error or "")
