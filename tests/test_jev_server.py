"""``soma serve`` over real sockets, around the real embedded LLM-judge S1 (SmolLM2): wire format,
auth, size limit, zstd bodies, error shapes, and answers that depend only on each question's text."""

import json

import httpx
import pytest
import zstandard

from soma_local.s1.llm_judge import LlmJudgeS1
from soma_local.serve.app import Running, create_app
from soma_local.s1.state import format_state

TICKET = "I was charged twice for my March invoice and the refund never came. Fix this today."
NOUL = {"type": "noul", "instructions": "Is the customer asking for money back?"}
CHOICE = {"type": "choice", "instructions": "Which team should handle this?",
          "criteria": {"Billing": "Payments, refunds", "Technical": None}}
SCORE = {"type": "score", "instructions": "How frustrated is the customer?", "criteria": ["Calm", "Frustrated", "Very angry"]}
KEY = "serve-test-key"
# llama.cpp logits move slightly with how a prompt was batched: a prompt that repeats the previous
# one re-decodes only its last token, which shifts the readout by up to ~0.02 on SmolLM2.
LLAMA_TOL = 0.03


@pytest.fixture(scope="module")
def s1(smollm_path):
    backend = LlmJudgeS1(smollm_path, n_threads=1)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def server(s1):
    with Running(create_app(s1, max_body_bytes=64 * 1024)) as srv:
        with httpx.Client(base_url=srv.url, timeout=300) as client:
            yield client


def ask(client, questions, state=TICKET, **kw):
    return client.post("/v1/systemone", json={"model": "jev-latest", "state": state, "questions": questions}, **kw)


def test_noul_choice_and_score_follow_the_wire_format(server, s1):
    r = ask(server, {"refund": NOUL, "team": CHOICE, "anger": SCORE})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["model"] == s1.name and set(body["answers"]) == {"refund", "team", "anger"}
    assert all(isinstance(v, int) for v in body["usage"].values()) and body["usage"]["input_tokens"] > 0
    noul, choice, score = (body["answers"][k] for k in ("refund", "team", "anger"))
    assert set(noul) == {"type", "noul"}
    # The noul is the S1's own probability for the instructions as the statement.
    assert noul["noul"] == pytest.approx(s1.score_states([(NOUL["instructions"], TICKET)])[0], abs=LLAMA_TOL)
    assert sum(choice["probabilities"].values()) == pytest.approx(1) and list(choice["probabilities"]) == ["Billing", "Technical"]
    assert choice["choice"] == max(choice["probabilities"], key=choice["probabilities"].get)
    p = score["probabilities"]
    assert list(p) == ["0", "1", "2"] and score["legend"] == {"0": "Calm", "1": "Frustrated", "2": "Very angry"}
    assert score["score"] == pytest.approx(sum(i * p[str(i)] for i in range(3)))


def test_answers_do_not_depend_on_ids_siblings_or_order(server):
    alone = ask(server, {"team": CHOICE}).json()["answers"]["team"]["probabilities"]
    crowd = ask(server, {"zz 🙂.renamed": SCORE, "x-1": NOUL, "질문": CHOICE}).json()["answers"]["질문"]["probabilities"]
    assert crowd == pytest.approx(alone, abs=LLAMA_TOL)


def test_structured_state_is_read_as_json_text(server, s1):
    state = {"subject": "Charged twice", "body": TICKET}
    got = ask(server, {"q": NOUL}, state=state).json()["answers"]["q"]["noul"]
    text = json.dumps(state, ensure_ascii=False, separators=(", ", ": "))
    assert got == pytest.approx(s1.score_states([(NOUL["instructions"], text)])[0], abs=LLAMA_TOL)


@pytest.mark.parametrize(
    "body",
    [
        b'{"model": "jev-latest", "state": "x", "questions": {',
        b"[]",
        json.dumps({"model": "jev-latest", "questions": {"q": NOUL}}).encode(),
        json.dumps({"model": "jev-latest", "state": "x", "questions": {}}).encode(),
        json.dumps({"model": "jev-latest", "state": "x", "questions": {"q": {"type": "boolean"}}}).encode(),
        json.dumps({"model": "jev-latest", "state": "x", "questions": {"q": {"type": "score", "criteria": {"0": "a"}}}}).encode(),
        json.dumps({"model": "jev-latest", "state": None, "questions": {"q": NOUL}}).encode(),
    ],
)
def test_invalid_requests_get_422_in_the_validation_shape(server, body):
    r = server.post("/v1/systemone", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert detail and all(d["loc"][0] == "body" and d["msg"] and d["type"] for d in detail)


def test_other_errors_have_the_official_error_shape(server):
    unknown = server.post("/v1/systemone", json={"model": "no-such-model", "state": "x", "questions": {"q": NOUL}})
    assert unknown.status_code == 400 and unknown.json()["detail"]["error_type"] == "api_usage_error"
    for r in (server.get("/v1/nowhere"), server.get("/v1/systemone")):
        assert r.status_code in (404, 405) and set(r.json()["detail"]) == {"error_type", "message"}
    models = server.get("/v1/models").json()["models"]
    assert {"jev-latest"} <= {m["name"] for m in models} and all(len(m["release_date"]) == 10 for m in models)


def test_size_limit_applies_to_plain_and_decompressed_bodies(server):
    big = ask(server, {"q": NOUL}, state="x" * 70_000)
    assert big.status_code == 413 and big.json()["detail"]["error_type"] == "request_too_large"
    bomb = zstandard.ZstdCompressor().compress(json.dumps(
        {"model": "jev-latest", "state": " " * 200_000, "questions": {"q": NOUL}}).encode())
    assert len(bomb) < 1024
    r = server.post("/v1/systemone", content=bomb, headers={"Content-Type": "application/json", "Content-Encoding": "zstd"})
    assert r.status_code == 413
    garbage = server.post("/v1/systemone", content=b"not zstd", headers={"Content-Encoding": "zstd"})
    assert garbage.status_code == 400


def test_zstd_bodies_get_the_same_answer_as_plain_ones(server):
    payload = json.dumps({"model": "jev-latest", "state": TICKET * 6, "questions": {"q": NOUL}}).encode()
    plain = server.post("/v1/systemone", content=payload, headers={"Content-Type": "application/json"})
    packed = server.post("/v1/systemone", content=zstandard.ZstdCompressor().compress(payload),
                         headers={"Content-Type": "application/json", "Content-Encoding": "zstd"})
    assert packed.status_code == 200
    assert packed.json()["answers"]["q"]["noul"] == pytest.approx(plain.json()["answers"]["q"]["noul"], abs=LLAMA_TOL)


def test_long_states_are_cut_the_soma_way_or_read_in_windows(smollm_path):
    short = LlmJudgeS1(smollm_path, n_threads=1, input_limit=256)
    reasoning = "Step: add the numbers again and compare with the last result.\n" * 40  # > 256 tokens
    soma_state = format_state("What is 17 + 25?", reasoning)
    cut = short.state_for("What is 17 + 25?", reasoning, [NOUL["instructions"]])
    assert len(cut) < len(soma_state) and cut.startswith("Task: What is 17 + 25?\n\nReasoning so far: ")
    expected = short.score_states([(NOUL["instructions"], cut)])[0]
    with Running(create_app(short)) as srv, httpx.Client(base_url=srv.url, timeout=300) as client:
        r = ask(client, {"q": NOUL}, state=soma_state)
        plain = ask(client, {"q": NOUL}, state=reasoning)
        huge_question = ask(client, {"q": {"type": "noul", "instructions": reasoning}}, state="short")
    short.close()
    assert r.status_code == 200 and r.json()["answers"]["q"]["noul"] == pytest.approx(expected, abs=LLAMA_TOL)
    assert plain.status_code == 200 and 0 <= plain.json()["answers"]["q"]["noul"] <= 1  # read in windows
    assert huge_question.status_code == 413  # a question longer than the S1 reads: refused, not a crash
    assert "reads at most 256 tokens" in huge_question.json()["detail"]["message"]


def test_auth_on_refuses_missing_and_wrong_keys(s1):
    with Running(create_app(s1, api_key=KEY)) as srv, httpx.Client(base_url=srv.url, timeout=300) as client:
        missing = ask(client, {"q": NOUL})
        wrong = ask(client, {"q": NOUL}, headers={"Authorization": "Bearer nope"})
        bad_body = client.post("/v1/systemone", content=b"{", headers={"Authorization": "Bearer nope"})
        right = ask(client, {"q": NOUL}, headers={"Authorization": f"Bearer {KEY}"})
        models = client.get("/v1/models")
    for r in (missing, wrong, bad_body, models):
        assert r.status_code == 401 and r.json()["detail"]["error_type"] == "authentication_error"
        assert KEY not in r.text
    assert right.status_code == 200


def test_auth_off_accepts_the_header_sdks_always_send(server):
    assert ask(server, {"q": NOUL}, headers={"Authorization": "Bearer anything"}).status_code == 200


def test_a_full_queue_answers_529_with_retry_after(s1):
    with Running(create_app(s1, max_pending=0)) as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
        r = ask(client, {"q": NOUL})
    assert r.status_code == 529 and r.headers["retry-after"] == "1" and r.json()["detail"]["error_type"] == "overloaded_error"
