"""Bad bodies against ``soma serve-chat`` (real models, real sockets): each gets a 4xx in OpenAI's error shape
whose message names the problem, never a 5xx, and the server keeps serving. Then a seeded random fuzz of
mutated bodies (``SOMA_FUZZ_SEED``, default 13; ``SOMA_CHAT_FUZZ_BODIES``, default 40): every answer is a
200 or a 4xx in that shape."""

from __future__ import annotations

import json
import os
import random
from collections import Counter

import httpx
import pytest

from soma_local.serve.app import Running
from soma_local.serve.chat import REQUEST_ID_HEADER, create_chat_app
from soma_local.supervisor import Supervisor

KEY = "chat-fuzz-key"
BODIES = int(os.environ.get("SOMA_CHAT_FUZZ_BODIES", "40"))
SEED = int(os.environ.get("SOMA_FUZZ_SEED", "13"))
GOOD = {"messages": [{"role": "user", "content": "What is 2 + 2?"}], "max_tokens": 2, "max_completion_tokens": 2}


@pytest.fixture(scope="module")
def supervisor():
    with Supervisor("smollm2-135m", s1="classifier", monitors=["looping", "overthinking"], n_ctx=1024) as sup:
        yield sup


@pytest.fixture(scope="module")
def http(supervisor):
    app = create_chat_app(supervisor, model="soma-smol", max_body_bytes=64 * 1024, api_key=KEY)
    with Running(app) as srv, httpx.Client(base_url=srv.url, timeout=300,
                                           headers={"Authorization": f"Bearer {KEY}"}) as client:
        yield client


def with_(**fields) -> dict:
    return {**GOOD, **fields}


def user(content) -> list[dict]:
    return [{"role": "user", "content": content}]


# (body, status, words the message must hold)
CASES = [
    (b"{not json", 400, ["not valid JSON"]),
    (b"\xff\xfe{}", 400, ["not UTF-8"]),
    (b'{"messages": [{"role": "user", "content": "hi \\ud800"}]}', 400, ["messages[0].content", "surrogate"]),
    (b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}', 400, ["NaN"]),
    (json.dumps([GOOD]).encode(), 400, ["JSON object", "not list"]),
    ({"model": "soma-smol"}, 400, ["messages", "required"]),
    ({"messages": "What is 2 + 2?"}, 400, ["messages", "list"]),
    ({"messages": []}, 400, ["messages", "at least 1"]),
    (with_(messages=user("")), 400, ["messages[0]", "empty"]),
    (with_(messages=user("   \n")), 400, ["messages[0]", "empty"]),
    (with_(messages=user(42)), 400, ["messages[0].content"]),
    (with_(messages=user([{"type": "image_url", "image_url": {"url": "x"}}])), 400, ["image_url", "text"]),
    (with_(messages=[{"role": "tool", "content": "x"}]), 400, ["messages[0].role"]),
    (with_(messages=[{"content": "x"}]), 400, ["messages[0].role", "required"]),
    (with_(messages=[*user("hi"), {"role": "assistant", "content": "hello"}]), 400, ["end with", "user"]),
    (with_(max_tokens=10**9, max_completion_tokens=None), 400, ["maximum context length", "max_tokens"]),
    (with_(max_tokens=10**30, max_completion_tokens=None), 400, ["maximum context length"]),
    (with_(max_tokens=0), 400, ["max_tokens", "greater than or equal to 1"]),
    (with_(max_tokens="16"), 400, ["max_tokens", "integer"]),
    (with_(temperature=-0.5), 400, ["temperature", "greater than or equal to 0"]),
    (with_(temperature="hot"), 400, ["temperature", "number"]),
    (with_(top_p=0), 400, ["top_p"]),
    (with_(seed=-1), 400, ["seed"]),
    (with_(stream="yes"), 400, ["stream", "boolean"]),
    (with_(stop=["a", "b", "c", "d", "e"]), 400, ["stop", "at most 4"]),
    (with_(stop=""), 400, ["stop", "empty"]),
    (with_(stream_options={"include_usage": True}), 400, ["stream_options", "stream"]),
    (with_(model="gpt-4o"), 404, ["gpt-4o", "does not exist"]),
    (with_(tools=[{"type": "function", "function": {"name": "f"}}]), 400, ["tools", "not supported"]),
    (with_(tool_choice="auto"), 400, ["tool_choice", "not supported"]),
    (with_(n=2), 400, ["n > 1", "not supported"]),
    (with_(logprobs=True), 400, ["logprobs", "not supported"]),
    (with_(response_format={"type": "json_object"}), 400, ["json_object", "not supported"]),
    (with_(soma={"monitors": ["nope"]}), 400, ["Unknown monitor 'nope'", "looping"]),
    (with_(soma={"monitors": []}), 400, ["soma.monitors"]),
    (with_(soma={"monitor": ["looping"]}), 400, ["soma.monitor", "Extra inputs"]),
    (with_(soma={"thresholds": {"looping": -1}}), 400, ["looping", "> 0"]),
    (with_(soma={"monitors": ["looping"], "thresholds": {"overthinking": 2}}), 400, ["overthinking", "not a monitor"]),
    (with_(soma={"mode": "loud"}), 400, ["soma.mode"]),
    (with_(soma="soma"), 400, ["soma"]),
    (with_(messages=user("word " * 3000)), 400, ["maximum context length is 1024", "messages take"]),
    (with_(messages=user("x" * 70_000)), 413, ["larger than 65536 bytes"]),
]


@pytest.mark.parametrize("body,status,words", CASES, ids=[f"{i}" for i in range(len(CASES))])
def test_a_bad_body_gets_a_4xx_that_names_the_problem(http, body, status, words):
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = http.post("/v1/chat/completions", content=content, headers={"Content-Type": "application/json"})
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"]
    for word in words:
        assert word in error["message"], (word, error["message"])
    assert r.headers[REQUEST_ID_HEADER]


def test_the_gates_answer_in_the_openai_shape(http):
    url = str(http.base_url.join("/v1/chat/completions"))
    missing = httpx.post(url, json=GOOD)
    wrong = httpx.post(url, json=GOOD, headers={"Authorization": "Bearer nope"})
    for r in (missing, wrong):
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key" and KEY not in r.text
    gzip = http.post("/v1/chat/completions", content=b"x", headers={"Content-Encoding": "gzip"})
    assert gzip.status_code == 415 and "gzip" in gzip.json()["error"]["message"]
    assert http.get("/v1/chat/completions").status_code == 405
    assert http.get("/v1/models/other").status_code == 404


def test_the_server_still_answers_after_the_bad_bodies(http):
    r = http.post("/v1/chat/completions", json=GOOD)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["role"] == "assistant"
    assert r.json()["model"] == "soma-smol"


EDGE = ["", " ", "\x00", "\ud800", "\U0001f600", "\u202e", "null", "NaN", "{", "\\", "word " * 50, 0, -1, 1.5, 2**63,
        True, None, [], {}, [1, "a"], {"a": None}]


def mutate(rng: random.Random, value):
    """``value`` with one random subtree replaced, dropped or retyped."""
    if isinstance(value, dict) and value and rng.random() < 0.75:
        key = rng.choice(list(value))
        out = dict(value)
        if rng.random() < 0.2:
            del out[key]
        else:
            out[key] = mutate(rng, value[key])
        return out
    if isinstance(value, list) and value and rng.random() < 0.75:
        out = list(value)
        i = rng.randrange(len(out))
        out[i] = mutate(rng, out[i])
        return out
    return rng.choice(EDGE)


def test_random_mutations_get_200_or_a_4xx_never_a_5xx(http):
    rng = random.Random(SEED)
    template = {**GOOD, "temperature": 0.5, "top_p": 0.9, "seed": 1, "stop": ["\n\n"], "stream": False,
                "soma": {"monitors": ["looping"], "thresholds": {"looping": 2.0}, "mode": "soma"}}
    seen: Counter = Counter()
    for _ in range(BODIES):
        body = mutate(rng, template)
        try:
            content = json.dumps(body).encode("utf-8", "surrogatepass")
        except ValueError:
            continue
        r = http.post("/v1/chat/completions", content=content, headers={"Content-Type": "application/json"})
        seen[r.status_code] += 1
        assert r.status_code == 200 or 400 <= r.status_code < 500, (body, r.status_code, r.text)
        if r.status_code != 200:
            assert r.json()["error"]["message"]
    print(f"chat fuzz: {sum(seen.values())} bodies, statuses {dict(sorted(seen.items()))}")
    assert http.post("/v1/chat/completions", json=GOOD).status_code == 200
