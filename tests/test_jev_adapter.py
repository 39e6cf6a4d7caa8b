"""The Jev S1 adapter against jevcompat's reference mock (the stand-in for hosted Jev) and against
sockets that fail: it must survive every fault the mock offers and never raise for a bad scan."""

import socket
import time

import pytest
from jevcompat.mock import FAULTS, MockConfig, Running

from soma_local.errors import S1Error
from soma_local.s1 import jev
from soma_local.s2.model_files import GgufVocab
from soma_local.s1.base import S1Query
from soma_local.s1.factory import load_s1
from soma_local.s1.jev import CUSTOM_KEY_ENV, JevS1, RetryPolicy, resolve_endpoint

TASK = "A train leaves at 3 pm and travels 120 km at 60 km/h. When does it arrive?"
REASONING = "120 / 60 = 2 hours, so 5 pm.\nLet me double-check: 60 km/h for 2 hours is 120 km. Yes, 5 pm.\n"
STATEMENTS = ["The reasoning has already confirmed its answer but keeps re-checking it.",
              "The reasoning noticed missing information but keeps trying to answer."]
QUERIES = [S1Query(s, TASK, REASONING) for s in STATEMENTS]
KEY = "sk-test-never-in-a-trace-0123456789"
# What each fault does to a noul-only client: no usable answer, or one answer missing.
BREAKS_ALL = {"wrong-route", "xssi-200", "auth-x-api-key", "reject-jev-latest", "boolean-type", "noul-range"}
BREAKS_SECOND = {"first-question-only"}
CHANGES_VALUES = {"id-leaks", "batch-leaks", "order-leaks"}  # still valid probabilities
KEYED = {"auth-x-api-key", "auth-plain", "auth-invalid-403-text"}  # only observable with a key


@pytest.fixture(scope="module")
def tokenizer(smollm_path):
    return GgufVocab.from_path(smollm_path)


FAST = RetryPolicy(backoff_initial=0.01, backoff_max=0.05)


def adapter(url, tokenizer, **kw):
    kw.setdefault("retry", FAST)
    return JevS1(url, tokenizer, **kw)


@pytest.fixture(scope="module")
def clean_probs(tokenizer):
    with Running(MockConfig()) as mock:
        s1 = adapter(mock.url, tokenizer)
        probs = s1.score(QUERIES)
        s1.close()
        assert mock.server.RequestHandlerClass.cfg.requests == 1  # all monitors of a pause, one request
    assert all(0 < p < 1 for p in probs) and s1.last_error is None
    return probs


def test_mock_answers_are_the_mocks_own_model(tokenizer, clean_probs):
    """The probability we read is exactly what the reference model computes for the state we sent."""
    from jevcompat.mock import answer

    s1 = adapter("http://127.0.0.1:9", tokenizer)
    state = s1.state_for(TASK, REASONING, STATEMENTS)
    assert state == f"Task: {TASK}\n\nReasoning so far: {REASONING}"
    expected = [answer(MockConfig(), state, f"m{i}", {"type": "noul", "instructions": s}, i, 2)["noul"]
                for i, s in enumerate(STATEMENTS)]
    assert clean_probs == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_adapter_survives_every_mock_fault(fault, tokenizer, clean_probs):
    key = KEY if fault in KEYED else None
    with Running(MockConfig(key=key, faults=frozenset({fault}))) as mock:
        s1 = adapter(mock.url, tokenizer, api_key=key)
        probs = s1.score(QUERIES)  # never raises
        s1.close()
    assert len(probs) == 2 and all(p is None or 0 <= p <= 1 for p in probs)
    if fault in BREAKS_ALL:
        assert probs == [None, None] and s1.last_error and s1.failed_requests == 1
    elif fault in BREAKS_SECOND:
        assert probs == [clean_probs[0], None] and "no answer for 'm1'" in s1.last_error
    elif fault in CHANGES_VALUES:
        assert None not in probs and s1.last_error is None
    else:
        assert probs == clean_probs and s1.last_error is None
    assert KEY not in (s1.last_error or "") and KEY not in s1.name and KEY not in repr(vars(s1))


class FakeClock:
    """The adapter's clock: its retry waits are recorded instead of slept, and time moves only by them.

    What the retry tests check is which waits the adapter chooses and when its budget stops it, not how
    long a loaded machine takes to refuse a connection; on the real clock both would move with the load.
    """

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(jev, "time", fake)  # the adapter's module alone: servers and httpx keep real time
    return fake


def test_rate_limits_are_retried_after_the_servers_retry_after(tokenizer, clean_probs, clock):
    cfg = MockConfig(busy_every=2)  # every 2nd request: 429, Retry-After: 0
    with Running(cfg) as mock:
        s1 = adapter(mock.url, tokenizer, retry=RetryPolicy())  # SDK defaults: Retry-After wins over backoff
        assert s1.score(QUERIES) == clean_probs and s1.score(QUERIES) == clean_probs
        assert clock.waits == [0.0] and cfg.requests == 3 and s1.failed_requests == 0
        s1.close()


def test_wrong_key_is_a_missing_scan_that_does_not_show_the_key(tokenizer):
    with Running(MockConfig(key="the-right-key")) as mock:
        s1 = adapter(mock.url, tokenizer, api_key=KEY)
        assert s1.score(QUERIES) == [None, None]
        assert s1.last_error.startswith(f"jev {mock.url}: HTTP 401 authentication_error") and KEY not in s1.last_error
        assert mock.server.RequestHandlerClass.cfg.requests == 0  # 401 is not retried


def test_a_silent_server_times_out_and_the_scan_is_missing(tokenizer):
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        s1 = adapter(url, tokenizer, timeout=0.3, retry=RetryPolicy(max_retries=1, backoff_initial=0.05))
        t0 = time.monotonic()
        assert s1.score(QUERIES) == [None, None]
        # Two 0.3 s timeouts at least; and less than one attempt at the default 10 s timeout, so it was the
        # 0.3 s that ended them (the bound leaves a loaded machine 15 times the time it needs).
        assert 0.6 <= time.monotonic() - t0 < 10
        assert "timed out after 0.3s (after 2 attempts)" in s1.last_error


def test_retries_stop_at_the_time_budget(tokenizer, clock):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: connection refused
    s1 = adapter(url, tokenizer, retry=RetryPolicy(max_retries=5, backoff_initial=0.2, jitter=0, budget=0.5))
    assert s1.score(QUERIES) == [None, None]
    # 0.2 s waited after the first refusal; the second wait (0.4 s) would pass the 0.5 s budget, so it stops.
    assert clock.waits == [0.2] and "connection failed" in s1.last_error and "after 2 attempts" in s1.last_error


def test_many_states_go_out_as_one_request_each_under_the_cap(tokenizer, clean_probs):
    cfg = MockConfig()
    queries = [S1Query(s, TASK, REASONING[: len(REASONING) - 10 * i]) for i in range(6) for s in STATEMENTS]
    with Running(cfg) as mock:
        s1 = adapter(mock.url, tokenizer, max_concurrency=2)
        probs = s1.score_states([(q.statement, s1.state_for(q.task, q.reasoning, STATEMENTS)) for q in queries])
        s1.close()
    assert cfg.requests == 6 and all(p is not None for p in probs) and probs[:2] == clean_probs


def test_factory_needs_a_key_for_hosted_jev_and_reads_base_urls(monkeypatch, smollm_path):
    monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)
    monkeypatch.delenv("TYPESAFE_BASE_URL", raising=False)
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    with pytest.raises(S1Error, match="TYPESAFE_API_KEY"):
        load_s1("jev")
    with pytest.raises(S1Error, match="OPENROUTER_API_KEY"):
        load_s1("jev:openrouter")
    with pytest.raises(S1Error, match="neither"):
        load_s1("jev:ftp://x")
    monkeypatch.setenv("TYPESAFE_BASE_URL", "http://127.0.0.1:8787/")
    s1 = load_s1("jev")
    assert s1.url == "http://127.0.0.1:8787/v1/systemone" and s1.input_limit == 2048
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    assert load_s1("jev:openrouter").url == "https://openrouter.ai/api/v1/systemone"


def test_credentials_in_a_url_are_never_shown_and_still_used(tokenizer, clean_probs):
    with Running(MockConfig()) as mock:
        s1 = adapter(mock.url.replace("http://", "http://user:SECRET-PW@"), tokenizer)
        assert s1.score(QUERIES) == clean_probs
        s1.close()
    shown = f"{s1.name} {s1.base_url} {s1.url} {s1.last_error}"
    assert "SECRET" not in shown and "user:***@" in s1.name
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    failing = adapter(f"http://u:SECRET-PW@127.0.0.1:{port}", tokenizer, retry=RetryPolicy(max_retries=0))
    assert failing.score(QUERIES) == [None, None] and "SECRET" not in failing.last_error


def test_a_custom_url_gets_its_own_key_variable_never_a_hosted_key(monkeypatch):
    monkeypatch.setenv("TYPESAFE_API_KEY", KEY)
    monkeypatch.delenv("TYPESAFE_BASE_URL", raising=False)
    assert resolve_endpoint("http://127.0.0.1:8000") == ("http://127.0.0.1:8000", CUSTOM_KEY_ENV)
    assert resolve_endpoint("")[1] == "TYPESAFE_API_KEY"
    monkeypatch.setenv("TYPESAFE_BASE_URL", "http://127.0.0.1:8787")
    assert resolve_endpoint("typesafe") == ("http://127.0.0.1:8787", "TYPESAFE_API_KEY")  # the SDK's own variable pair
    with pytest.raises(S1Error, match=r"\*\*\*") as err:
        resolve_endpoint("ftp://u:SECRET@host")
    assert "SECRET" not in str(err.value)
