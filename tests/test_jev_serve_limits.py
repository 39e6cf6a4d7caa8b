"""``soma serve`` as a drop-in Jev around the shipped classifier S1 (MiniLM, 512-token window): long
states read in windows, the documented limits, lone surrogates, request ids, zstd frames, assets."""

import json
import threading

import httpx
import pytest
import zstandard

from soma_local.serve.answers import MAX_REQUEST_TOKENS, MAX_STATE_TOKENS, MIN_PAIR_COST, mean_log_odds, state_windows
from soma_local.s1.base import S1
from soma_local.s1.factory import load_s1
from soma_local.serve.app import REQUEST_ID_HEADER, Running, batches, create_app
from soma_local.s1.state import format_state
from waiting import wait_for

NOUL = {"type": "noul", "instructions": "Is the customer asking for money back?"}
CHOICE = {"type": "choice", "instructions": "Which team should handle this?",
          "criteria": {"Billing": "Payments, refunds", "Technical": None, "Sales": None}}
SCORE = {"type": "score", "instructions": "How frustrated is the customer?", "criteria": ["Calm", "Frustrated", "Very angry"]}
PROSE = [
    "I ordered a blue kettle on the fourth of March and it arrived with a cracked lid.",
    "The delivery driver left it at the wrong door, so a neighbour brought it over two days later.",
    "When I called support the line was busy for an hour, and the chat window kept closing on me.",
    "My invoice shows the kettle twice, along with a shipping fee I was told would be waived.",
    "I have been a customer for six years and this is the first time something like this has happened.",
    "Please tell me whether I should send the kettle back or keep it while you look into the charge.",
]


@pytest.fixture(scope="module")
def s1():
    backend = load_s1(None, n_threads=1)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def client(s1):
    with Running(create_app(s1)) as srv, httpx.Client(base_url=srv.url, timeout=300) as http:
        yield http


def prose(s1, tokens: int) -> str:
    """Ordinary customer prose of exactly ``tokens`` tokens in the S1's tokenizer (no S1 state)."""
    text, i = "", 0
    while len(s1.tokenizer.encode(text)) < tokens + 20:
        text += PROSE[i % len(PROSE)] + (" " if i % 4 != 3 else "\n\n")
        i += 1
    ids = s1.tokenizer.encode(text)
    for cut in range(tokens, tokens - 40, -1):  # decoding can merge a token or two: land exactly on `tokens`
        text = s1.tokenizer.decode(ids[:cut])
        if len(s1.tokenizer.encode(text)) == tokens:
            return text
    raise AssertionError("could not build a state of that length")


def ask(client, questions, state, **kw):
    return client.post("/v1/systemone", json={"model": "jev-latest", "state": state, "questions": questions}, **kw)


@pytest.mark.parametrize("tokens", [600, 1500, 2048])
def test_long_prose_states_are_answered_in_windows(client, s1, tokens):
    state = prose(s1, tokens)
    assert len(s1.tokenizer.encode(state)) == tokens > s1.reads_at_once
    r = ask(client, {"refund": NOUL, "team": CHOICE, "anger": SCORE}, state)
    assert r.status_code == 200, r.text
    answers = r.json()["answers"]
    probs = [answers["refund"]["noul"], *answers["team"]["probabilities"].values(), *answers["anger"]["probabilities"].values()]
    assert all(0 <= p <= 1 for p in probs) and len(probs) == 7
    assert sum(answers["team"]["probabilities"].values()) == pytest.approx(1)
    assert r.json()["usage"]["input_tokens"] >= tokens


def test_state_windows_cover_the_whole_state_with_overlap():
    ids = list(range(1000))
    decode = lambda chunk: " ".join(f"w{i}" for i in chunk)  # noqa: E731 - one word per token
    windows = state_windows(ids, decode, 200)
    words = [[int(w[1:]) for w in win.split()] for win in windows]
    assert words[0][0] == 0 and words[-1][-1] == 999 and all(len(w) <= 200 for w in words)
    covered = {i for w in words for i in w}
    assert covered == set(ids)
    assert all(a[-1] - b[0] >= 20 for a, b in zip(words, words[1:]))  # neighbours share text


def test_window_probabilities_combine_symmetrically():
    ps = [0.9, 0.2, 0.6]
    assert mean_log_odds([1 - p for p in ps]) == pytest.approx(1 - mean_log_odds(ps))
    assert mean_log_odds([0.3]) == 0.3 and 0.2 < mean_log_odds(ps) < 0.9
    assert 0 <= mean_log_odds([0.0, 1.0, 1.0]) <= 1


def test_a_state_over_the_limit_gets_413_naming_it(client, s1):
    r = ask(client, {"q": NOUL}, prose(s1, MAX_STATE_TOKENS + 1))
    assert r.status_code == 413 and r.json()["detail"]["error_type"] == "request_too_large"
    assert f"up to {MAX_STATE_TOKENS} tokens" in r.json()["detail"]["message"]


def test_work_per_request_is_bounded_by_options_times_state(client, s1):
    options = {f"Team {i}": None for i in range(255)}
    heavy = ask(client, {"team": {"type": "choice", "instructions": "Which team?", "criteria": options}}, prose(s1, 2048))
    assert heavy.status_code == 413 and f"more than {MAX_REQUEST_TOKENS} S1 input tokens" in heavy.json()["detail"]["message"]
    short = ask(client, {"team": {"type": "choice", "instructions": "Which team?", "criteria": options}}, PROSE[0])
    assert short.status_code == 200 and len(short.json()["answers"]["team"]["probabilities"]) == 255


def test_work_units_respect_the_token_budget():
    assert batches([300, 300, 300, 5000, 10], 700) == [range(0, 2), range(2, 3), range(3, 4), range(4, 5)]
    assert batches([], 700) == []


def test_lone_surrogates_are_answered_and_ids_come_back_exactly(client):
    raw = ('{"model": "jev-latest", "state": "a \\ud800 b", "questions": {'
           '"id \\udfff": {"type": "noul", "instructions": "x \\udc00"},'
           '"c": {"type": "choice", "criteria": {"opt \\ud800": null, "fine": null}}}}')
    r = client.post("/v1/systemone", content=raw.encode(), headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    answers = json.loads(r.content)["answers"]
    assert set(answers) == {"id \udfff", "c"} and set(answers["c"]["probabilities"]) == {"opt \ud800", "fine"}


def test_every_response_has_a_request_id(client):
    responses = [ask(client, {"q": NOUL}, "hi"), client.post("/v1/systemone", content=b"{"), client.get("/v1/nowhere"),
                 client.get("/v1/models")]
    ids = [r.headers.get(REQUEST_ID_HEADER) for r in responses]
    assert all(i and i.startswith("req_") for i in ids) and len(set(ids)) == len(ids)


def test_multi_frame_zstd_bodies_are_read_whole(client):
    payload = json.dumps({"model": "jev-latest", "state": PROSE[3] * 4, "questions": {"q": NOUL}}).encode()
    plain = client.post("/v1/systemone", content=payload, headers={"Content-Type": "application/json"})
    frames = b"".join(zstandard.ZstdCompressor().compress(payload[i : i + 50]) for i in range(0, len(payload), 50))
    packed = client.post("/v1/systemone", content=frames, headers={"Content-Type": "application/json", "Content-Encoding": "zstd"})
    assert packed.status_code == 200 and packed.json()["answers"] == plain.json()["answers"]


def test_image_assets_get_a_clear_not_supported(client):
    body = {"model": "jev-latest", "state": "look", "questions": {"q": NOUL}, "assets": {"img": {"type": "image", "part": "asset-0"}}}
    r = client.post("/v1/systemone", json=body)
    assert r.status_code == 422 and "not supported" in r.json()["detail"]["message"]
    multipart = client.post("/v1/systemone", files={"request": (None, json.dumps(body)), "asset-0": ("a.png", b"\x89PNG")})
    assert multipart.status_code == 415 and "not supported" in multipart.json()["detail"]["message"]
    box = client.post("/v1/systemone", json={**body, "assets": None, "questions": {"b": {"type": "box", "instructions": "cat"}}})
    assert box.status_code == 422 and "does not support" in box.json()["detail"]["message"]


class Recording(S1):
    """The classifier, recording the statements of each pass it makes. Each pass waits for ``go`` first
    (set from the start), so a test can hold the scoring back and decide itself when it may proceed."""

    def __init__(self, inner):
        self.inner, self.passes = inner, []
        self.name, self.input_limit, self.template_tokens = inner.name, inner.input_limit, inner.template_tokens
        self.reads_at_once = inner.reads_at_once
        self.go = threading.Event()
        self.go.set()

    @property
    def tokenizer(self):
        return self.inner.tokenizer

    def score_states(self, pairs):
        self.go.wait()
        self.passes.append([statement for statement, _ in pairs])
        return self.inner.score_states(pairs)


def test_a_heavy_request_stops_when_its_client_goes_and_does_not_hold_up_a_light_one(s1):
    """Ordered by what the server does, not by a clock: the heavy request is held back until its client
    has given up (so no machine is fast enough to finish it first), with one request allowed in flight
    a 529 says the server still holds the gone one and a 200 that it has let it go, and the S1's own
    record of its passes says what was scored after that."""
    recording = Recording(s1)
    options = {f"Team {i}": f"Handles case family {i}" for i in range(255)}
    heavy = {"model": "jev-latest", "state": prose(s1, 400), "questions": {"t": {"type": "choice", "criteria": options}}}
    recording.go.clear()
    with Running(create_app(recording, max_pending=1)) as srv:
        with httpx.Client(base_url=srv.url, timeout=httpx.Timeout(60, read=1.0)) as impatient:
            with pytest.raises(httpx.ReadTimeout):
                impatient.post("/v1/systemone", json=heavy)
        recording.go.set()
        with httpx.Client(base_url=srv.url, timeout=60) as http:
            light = lambda: ask(http, {"q": NOUL}, PROSE[0])  # noqa: E731
            r = wait_for(lambda: (answer := light()).status_code != 529 and answer,
                         "the server to let go of the request whose client has gone")
            assert r.status_code == 200 and light().status_code == 200
    kinds = ["light" if statements == [NOUL["instructions"]] else "heavy" for statements in recording.passes]
    heavy_pairs = sum(len(statements) for statements in recording.passes) - 2
    assert kinds[-2:] == ["light", "light"] and set(kinds[:-2]) <= {"heavy"}  # nothing for the gone client after
    assert heavy_pairs < 255, "the light request waited for the gone client's work"


def test_many_tiny_questions_count_as_the_calls_they_cost(client):
    tiny = {f"q{i}": {"type": "noul", "instructions": f"ok {i}?"} for i in range(MAX_REQUEST_TOKENS // MIN_PAIR_COST + 1)}
    r = ask(client, tiny, "hi")
    assert r.status_code == 413 and "S1 input tokens" in r.json()["detail"]["message"]


def test_an_s1_state_is_cut_the_soma_way_not_windowed(client, s1):
    reasoning = "Step: add the numbers again and compare with the last result.\n" * 200  # > 2,048 tokens
    state = format_state("What is 17 + 25?", reasoning)
    cut = s1.state_for("What is 17 + 25?", reasoning, [NOUL["instructions"]])
    assert len(s1.tokenizer.encode(state)) > s1.input_limit and cut.startswith("Task: What is 17 + 25?")
    r = ask(client, {"q": NOUL}, state)
    assert r.status_code == 200 and r.json()["answers"]["q"]["noul"] == pytest.approx(s1.score_states([(NOUL["instructions"], cut)])[0], abs=1e-5)
