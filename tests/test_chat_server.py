"""``soma serve-chat`` over real sockets, driven by the official ``openai`` client, around real models (the
embedded SmolLM2 as S2, the shipped classifier S1): models, whole and streamed completions with reasoning
and content in their own fields, a reminder in the stream, usage that agrees with the trace, a
conversation, turns between concurrent clients, a full queue's 429 and a disconnect that stops S2."""

from __future__ import annotations

import json
import threading
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import httpx
import openai
import pytest

from soma_local.engine.trace import RunEnd, RunStart, read_trace
from soma_local.serve.app import Running
from soma_local.serve.chat import REQUEST_ID_HEADER, create_chat_app
from soma_local.supervisor import Supervisor
from waiting import wait_for

QUESTION = "A shop sells pens at $2 each. Tom buys 7 pens and pays with a $20 bill. How much change does he get?"
# SmolLM2 on the bakery problem of the demo loops ("It took 23 days ...") within about 1,000 tokens.
LOOPING_QUESTION = (
    "A bakery sells muffins for $3 each and cookies for $1.50 each. On Monday it sold 48 muffins and "
    "twice as many cookies. On Tuesday it sold a third fewer muffins than on Monday and 30 more cookies "
    "than on Monday. How much money did the bakery make over the two days? Check your work."
)


@pytest.fixture(scope="module")
def supervisor():
    with Supervisor("smollm2-135m", s1="classifier", monitors=["looping", "overthinking"], n_ctx=2048,
                    temperature=0.6, seed=7) as sup:
        yield sup


@pytest.fixture(scope="module")
def server(supervisor, tmp_path_factory):
    traces = tmp_path_factory.mktemp("chat-traces")
    with Running(create_chat_app(supervisor, trace_dir=traces)) as srv:
        yield SimpleNamespace(url=srv.url, traces=traces, model=supervisor.s2_name)


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=300)


def ask(q: str = QUESTION) -> list[dict]:
    return [{"role": "user", "content": q}]


def trace_of(server, name: str) -> tuple[RunStart, RunEnd]:
    records = list(read_trace(server.traces / name))
    return records[0], records[-1]


def wait_for_end(path: Path) -> RunEnd:
    """The run_end of a trace still being written (a cancelled run ends within a few tokens)."""
    def ended() -> RunEnd | None:
        try:
            records = list(read_trace(path)) if path.is_file() else []
        except ValueError:  # a line half written
            return None
        return records[-1] if records and isinstance(records[-1], RunEnd) else None

    return wait_for(ended, f"run_end in {path}")


def test_the_model_list_names_the_served_model(client, server):
    models = client.models.list()
    assert [m.id for m in models.data] == [server.model]
    assert client.models.retrieve(server.model).id == server.model


def test_a_whole_completion_has_reasoning_content_and_usage_from_the_trace(client, server):
    response = client.chat.completions.create(model=server.model, messages=ask(), max_tokens=48, seed=3)
    message, extra = response.choices[0].message, response.model_extra
    reasoning = message.model_extra["reasoning_content"]
    assert reasoning and message.model_extra["reasoning"] == reasoning
    assert isinstance(message.content, str)
    start, end = trace_of(server, extra["soma"]["trace"])
    usage = response.usage
    assert usage.prompt_tokens == end.tokens.prompt
    assert usage.completion_tokens == end.tokens.thinking + end.tokens.answer <= 48
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.completion_tokens_details.reasoning_tokens == end.tokens.thinking
    assert reasoning == end.thinking and message.content == end.answer  # no reminder in 48 tokens
    assert response.choices[0].finish_reason == ("length" if end.stop == "limit" else "stop")
    assert extra["soma"]["stop"] == end.stop and extra["soma"]["thresholds"] == start.thresholds


def test_a_stream_sends_reasoning_then_content_then_usage(client, server):
    stream = client.chat.completions.create(model=server.model, messages=ask(), max_tokens=200, seed=5,
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    reasoning = "".join(c.choices[0].delta.model_extra.get("reasoning_content") or "" for c in chunks if c.choices)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finishing) == 1 and chunks[-1].choices == [] and chunks[-1].usage is not None
    summary = finishing[0].model_extra["soma"]
    assert summary["type"] == "summary"
    _, end = trace_of(server, summary["trace"])
    assert reasoning.startswith(end.thinking[:20]) and content == end.answer
    assert chunks[-1].usage.completion_tokens == end.tokens.thinking + end.tokens.answer
    assert chunks[-1].usage.completion_tokens_details.reasoning_tokens == end.tokens.thinking
    # Every reasoning delta comes before every content delta.
    kinds = [("r" if c.choices[0].delta.model_extra.get("reasoning_content") else "c") for c in chunks
             if c.choices and (c.choices[0].delta.content or c.choices[0].delta.model_extra.get("reasoning_content"))]
    assert kinds == sorted(kinds, reverse=True)


def test_a_looping_run_streams_its_reminder_marked_in_the_reasoning(client, server):
    """SmolLM2 loops on the bakery problem; the looping monitor reminds it (at about 800 thinking tokens on
    a 2-core EPYC, where it then concludes)."""
    stream = client.chat.completions.create(
        model=server.model, messages=ask(LOOPING_QUESTION), max_tokens=1200, seed=0, stream=True,
        extra_body={"soma": {"monitors": ["looping"]}})
    chunks = list(stream)
    records = [c.model_extra["soma"] for c in chunks if c.model_extra.get("soma")]
    reminders = [r for r in records if r["type"] == "reminder"]
    assert reminders, f"no reminder in {[r['type'] for r in records]}"
    reasoning = "".join(c.choices[0].delta.model_extra.get("reasoning_content") or "" for c in chunks if c.choices)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert reminders[0]["text"] in reasoning and reminders[0]["text"].startswith("\n<reminder>")
    scans = [r for r in records if r["type"] == "scan"]
    assert scans and set(scans[0]["monitors"]) == {"looping"}
    summary = records[-1]
    _, end = trace_of(server, summary["trace"])
    assert summary["type"] == "summary" and summary["reminders"] == len(reminders) == end.reminders
    # The reasoning is S2's own thinking with the reminder paragraph where it went in.
    assert reasoning.replace(reminders[0]["text"], "", 1).startswith(end.thinking[:300])
    assert content == end.answer


def test_a_takeover_says_which_monitor_and_where(client, server):
    """Without a reminder first (no_reminder) and a low h, the looping monitor takes over at its first
    confident scan; the answer starts with the monitor's prefill ("The answer is")."""
    response = client.chat.completions.create(
        model=server.model, messages=ask(LOOPING_QUESTION), max_tokens=1200, seed=0,
        extra_body={"soma": {"monitors": ["looping"], "thresholds": {"looping": 0.05}, "mode": "no_reminder"}})
    summary, message = response.model_extra["soma"], response.choices[0].message
    start, end = trace_of(server, summary["trace"])
    assert start.thresholds == {"looping": 0.05} and summary["mode"] == "no_reminder"
    assert end.stop == "takeover" and summary["stop"] == "takeover", "SmolLM2 did not loop here"
    took = summary["takeover"]
    assert took["monitor"] == "looping" and took["thinking_tokens"] == end.tokens.thinking
    assert response.choices[0].finish_reason == "stop" and message.content.startswith("The answer is")
    assert "I keep repeating myself" in message.model_extra["reasoning_content"]  # the conclusion S2 read
    assert response.usage.completion_tokens == end.tokens.thinking + end.tokens.answer


def test_a_conversation_is_answered_with_its_last_user_message_as_the_task(client, server):
    messages = [
        {"role": "system", "content": "You are a careful tutor."},
        {"role": "user", "content": "What is 6 times 7?"},
        {"role": "assistant", "content": "6 times 7 is 42."},
        {"role": "user", "content": [{"type": "text", "text": "And what is that "}, {"type": "text", "text": "plus 8?"}]},
    ]
    response = client.chat.completions.create(model=server.model, messages=messages, max_tokens=32)
    start, end = trace_of(server, response.model_extra["soma"]["trace"])
    assert start.question.endswith("And what is that plus 8?") and "6 times 7 is 42." in start.question
    assert "careful tutor" not in start.question  # system text is S2's instruction, not S1's task
    single = client.chat.completions.create(model=server.model, messages=ask("What is 6 times 7?"), max_tokens=8)
    assert response.usage.prompt_tokens > single.usage.prompt_tokens


def test_a_whole_completion_in_a_mode_that_never_takes_over_reports_h_as_infinity(client, server):
    response = client.chat.completions.create(model=server.model, messages=ask(), max_tokens=4,
                                              extra_body={"soma": {"mode": "remind_only"}})
    assert response.model_extra["soma"]["thresholds"]["looping"] == "Infinity"


def test_unknown_fields_are_ignored_and_named(client, server):
    response = client.chat.completions.create(model=server.model, messages=ask(), max_tokens=4,
                                              extra_body={"frequency_penalty": 0.5, "user_tag": "x"})
    assert response.model_extra["soma"]["ignored_fields"] == ["frequency_penalty", "user_tag"]


def test_concurrent_clients_are_all_answered_in_turn(client, server):
    results: dict[int, object] = {}

    def one(i: int) -> None:
        results[i] = client.chat.completions.create(model=server.model, messages=ask(f"What is {i} + {i}?"),
                                                    max_tokens=24, seed=i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [0, 1, 2, 3]
    spans = []
    for response in results.values():
        start, end = trace_of(server, response.model_extra["soma"]["trace"])
        began = datetime.fromisoformat(start.started_at).timestamp()
        spans.append((began, began + end.timings.wall))
    spans.sort()
    # One S2 sequence: each run starts after the one before it ended (10 ms for clock rounding).
    assert all(later[0] >= earlier[1] - 0.01 for earlier, later in zip(spans, spans[1:]))


def _stream_until_first_reasoning(http: httpx.Client, url: str, body: dict):
    """Open a streaming request and read until S2 has written something (its run holds S2 now). The line
    iterator is returned with the response and must be kept: dropping it closes the connection."""
    response = http.send(http.build_request("POST", f"{url}/v1/chat/completions", json=body), stream=True)
    assert response.status_code == 200
    lines = response.iter_lines()
    for line in lines:
        if line.startswith("data: ") and "reasoning_content" in line:
            return response, lines
    raise AssertionError("the stream ended before any reasoning")


def test_a_full_queue_answers_429_and_a_disconnect_stops_generation(supervisor, server, tmp_path):
    with Running(create_chat_app(supervisor, max_queue=0, trace_dir=tmp_path)) as busy, \
            httpx.Client(timeout=120) as http:
        long = {"messages": ask(LOOPING_QUESTION), "max_tokens": 1500, "seed": 0, "stream": True}  # loops long
        response, _lines = _stream_until_first_reasoning(http, busy.url, long)
        rid = response.headers[REQUEST_ID_HEADER]
        refused = http.post(f"{busy.url}/v1/chat/completions", json={"messages": ask(), "max_tokens": 4})
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
        error = refused.json()["error"]
        assert error["type"] == "rate_limit_error" and "busy" in error["message"]
        response.close()  # the client goes away mid-thought
        end = wait_for_end(tmp_path / f"{rid}.jsonl")
        assert end.stop == "cancelled" and end.tokens.thinking + end.tokens.answer < 1500
        # The slot is free again once the cancelled run has stopped.
        after = http.post(f"{busy.url}/v1/chat/completions", json={"messages": ask(), "max_tokens": 4})
        assert after.status_code == 200


def test_a_whole_completion_whose_client_leaves_is_cancelled_too(server):
    with httpx.Client(timeout=httpx.Timeout(120, read=1.5)) as http:
        with pytest.raises(httpx.ReadTimeout):
            http.post(f"{server.url}/v1/chat/completions",
                      json={"messages": ask(LOOPING_QUESTION), "max_tokens": 1500, "seed": 0})
    # The id went with the response that never came; the newest trace is this run's.
    newest = max(server.traces.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
    end = wait_for_end(newest)
    assert end.stop == "cancelled" and end.tokens.thinking + end.tokens.answer < 1500


def test_errors_have_the_openai_shape_and_the_client_raises_them(client, server):
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-4o", messages=ask(), max_tokens=4)
    assert info.value.body["code"] == "model_not_found" and "gpt-4o" in info.value.body["message"]
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=server.model, messages=ask(), tools=[{"type": "function", "function": {"name": "f"}}])
    assert info.value.body["param"] == "tools" and "not supported" in info.value.body["message"]
    r = httpx.post(f"{server.url}/v1/chat/completions", content=b"{", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert r.headers[REQUEST_ID_HEADER].startswith("req_")
    assert json.loads(httpx.get(f"{server.url}/v1/nowhere").text)["error"]["type"] == "not_found_error"
