"""Pure logic of the Jev support: wire validation, answers from S1 probabilities, confidence, retry
delays and response reading. No model and no network: these are functions of their inputs."""

import json
from email.utils import format_datetime
from datetime import datetime, timedelta, timezone

import pytest
from pydantic import TypeAdapter, ValidationError

from soma_local.serve.answers import make_answer, normalise, noul_statement, read_question
from soma_local.s1.jev_wire import (
    ChoiceQuestion,
    Question,
    SystemOneRequest,
    SystemOneResponse,
    choice_confidence,
    score_confidence,
)
from soma_local.s1.jev import JevFailure, RetryPolicy, error_text, read_nouls, redact_url, retry_after
from soma_local.s1.state import format_state, parse_state

question = TypeAdapter(Question).validate_python


def test_confidence_formulas_match_typesafes_documented_examples():
    assert choice_confidence([0.88, 0.12, 0.0]) == pytest.approx(0.82)
    assert score_confidence([0.0, 0.95, 0.05]) == pytest.approx(0.925)
    assert choice_confidence([1.0]) == 1.0 and choice_confidence([0.5, 0.5]) == 0.0
    assert score_confidence([1 / 3] * 3) == 0.0  # never negative


def test_noul_statement_is_the_instructions_verbatim_and_criteria_follow():
    assert noul_statement(question({"type": "noul", "instructions": "S holds."})) == "S holds."
    q = question({"type": "noul", "instructions": {"ask": "refund?"}, "criteria": {"false": ["no", "maybe"]}})
    assert noul_statement(q) == '{"ask": "refund?"}\nFalse if: ["no", "maybe"]'
    with pytest.raises(ValidationError):
        question({"type": "noul", "criteria": {"true": None}})  # nothing to judge


def test_choice_answer_is_normalised_keeps_names_and_picks_the_argmax():
    q = question({"type": "choice", "instructions": "Team?", "criteria": {"환불 요청": "money", "🙂 기타": None, "Tech": None}})
    reading = read_question(q)
    assert reading.statements == ["Team?\nAnswer: money", "Team?\nAnswer: 🙂 기타", "Team?\nAnswer: Tech"]
    a = make_answer(q, reading, [0.2, 0.6, 0.2])
    assert list(a.probabilities) == ["환불 요청", "🙂 기타", "Tech"]
    assert a.choice == "🙂 기타" and sum(a.probabilities.values()) == pytest.approx(1)
    assert a.probabilities["🙂 기타"] == pytest.approx(0.6) and a.confidence == pytest.approx(0.4)


def test_score_answer_is_the_expectation_with_the_levels_as_legend():
    levels = ["Calm", {"label": "Angry"}, "Furious"]
    q = question({"type": "score", "criteria": levels})
    a = make_answer(q, read_question(q), [0.1, 0.1, 0.3])
    assert a.probabilities == pytest.approx({"0": 0.2, "1": 0.2, "2": 0.6})
    assert a.score == pytest.approx(0.2 + 2 * 0.6)
    assert a.legend == {"0": "Calm", "1": {"label": "Angry"}, "2": "Furious"}


def test_the_answer_types_agree_where_the_question_s_structure_decides():
    """A yes/no choice or score is the noul of its instructions; options are their descriptions (ids are
    labels); options that read the same are one event; so these rules hold exactly, whatever the S1 says."""
    noul = question({"type": "noul", "instructions": "Has it stated an answer?"})
    as_choice = question({"type": "choice", "instructions": "Has it stated an answer?", "criteria": {"no": "No", "yes": "Yes"}})
    as_score = question({"type": "score", "instructions": "Has it stated an answer?", "criteria": ["False", "True"]})
    assert read_question(as_choice).statements == read_question(as_score).statements == read_question(noul).statements
    assert make_answer(as_choice, read_question(as_choice), [0.7]).probabilities == pytest.approx({"no": 0.3, "yes": 0.7})
    assert make_answer(as_score, read_question(as_score), [0.7]).probabilities == pytest.approx({"0": 0.3, "1": 0.7})
    base = question({"type": "choice", "instructions": "Now?", "criteria": {"a": "adding", "b": "checking", "c": "done"}})
    renamed = question({"type": "choice", "instructions": "Now?", "criteria": {"x": "adding", "y": "checking", "z": "done"}})
    cloned = question({"type": "choice", "instructions": "Now?",
                       "criteria": {"a": "adding", "b": "checking", "b2": "checking", "c": "done"}})
    assert read_question(base).statements == read_question(renamed).statements == read_question(cloned).statements
    probs = [0.5, 0.3, 0.2]
    before = make_answer(base, read_question(base), probs).probabilities
    after = make_answer(cloned, read_question(cloned), probs).probabilities
    assert after["b"] + after["b2"] == pytest.approx(before["b"]) and after["a"] == pytest.approx(before["a"])


def test_normalise_falls_back_to_uniform_when_every_option_got_zero():
    assert normalise([0.0, 0.0, 0.0, 0.0]) == [0.25] * 4


@pytest.mark.parametrize(
    "body",
    [
        {"model": "m", "state": "s", "questions": {}},
        {"model": "m", "state": None, "questions": {"a": {"type": "noul", "instructions": "x"}}},
        {"model": "m", "state": "s", "questions": {"a": {"type": "boolean", "instructions": "x"}}},
        {"model": "m", "state": "s", "questions": {"a": {"type": "choice", "criteria": {}}}},
        {"model": "m", "state": "s", "questions": {"a": {"type": "choice", "criteria": {f"o{i}": None for i in range(256)}}}},
        {"model": "m", "state": "s", "questions": {"a": {"type": "score", "criteria": {"0": "a", "1": "b"}}}},
        {"model": "m", "state": "s", "questions": {"a": {"type": "score", "criteria": ["a"]}}},
        {"model": "m", "state": "s", "questions": {"a": {"type": "score", "criteria": ["a", None]}}},
    ],
)
def test_requests_outside_the_documented_format_are_rejected(body):
    with pytest.raises(ValidationError):
        SystemOneRequest.model_validate(body)


def test_request_accepts_structured_text_and_ignores_unknown_fields():
    r = SystemOneRequest.model_validate(
        {"model": "jev-latest", "state": ["a", {"b": 1}], "seed": 7, "questions": {
            "q": {"type": "choice", "instructions": ["Route", "it"], "criteria": {"A": {"x": 1}, "B": ["y"], "C": None}}}}
    )
    assert isinstance(r.questions["q"], ChoiceQuestion) and r.state == ["a", {"b": 1}]


def test_responses_refuse_nan_and_out_of_range_probabilities():
    ok = {"model": "m", "answers": {"a": {"type": "noul", "noul": 0.5}}, "usage": {"input_tokens": 3, "output_tokens": 0}}
    SystemOneResponse.model_validate(ok)
    for bad in (float("nan"), 1.5, -0.1):
        with pytest.raises(ValidationError):
            SystemOneResponse.model_validate({**ok, "answers": {"a": {"type": "noul", "noul": bad}}})


def test_state_text_round_trips_through_parse_state():
    assert parse_state(format_state("Q?\n\nsecond line", "H\n\nReasoning so far: x")) == ("Q?\n\nsecond line", "H\n\nReasoning so far: x")
    assert parse_state("Hi, refund me") is None


def test_retry_after_prefers_milliseconds_then_seconds_then_dates():
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after({"retry-after": "2"}) == 2.0
    later = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    assert 25 < retry_after({"retry-after": later}) <= 30
    assert retry_after({"retry-after": "soon"}) is None and retry_after({}) is None


def test_backoff_doubles_from_half_a_second_to_five_with_a_quarter_jitter():
    policy = RetryPolicy()
    assert [policy.backoff(a, 0.0) for a in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert policy.backoff(1, 1.0) == pytest.approx(0.375)
    assert policy.delay(1, {"retry-after-ms": "10"}, 0.0) == 0.01
    assert {408, 429, 500, 503, 529} <= policy.statuses and 422 not in policy.statuses


def _body(answers, **extra):
    return json.dumps({"model": "m", "answers": answers, **extra}).encode()


def test_read_nouls_keeps_good_answers_and_names_each_bad_one():
    body = _body(
        {"m0": {"type": "noul", "noul": 0.25}, "m1": {"type": "boolean", "noul": 0.5}, "m2": {"type": "noul", "noul": 1.5},
         "m4": {"type": "noul", "noul": True}, "extra": {"type": "noul", "noul": 0.1}},
        usage={"input_tokens": 12.0, "output_tokens": 0},
    )
    reply = read_nouls(body, ["m0", "m1", "m2", "m3", "m4"])
    assert reply.probs == {"m0": 0.25, "m1": None, "m2": None, "m3": None, "m4": None}
    assert len(reply.problems) == 4 and "'m3'" in reply.problems[2] and reply.input_tokens == 12
    nan = read_nouls(b'{"answers": {"m0": {"type": "noul", "noul": NaN}}}', ["m0"])
    assert nan.probs == {"m0": None} and "nan" in nan.problems[0]


@pytest.mark.parametrize("body", [b")]}'\n{}", b"", b"[1, 2]", b'{"answers": []}', b"\xff\xfe"])
def test_read_nouls_fails_the_whole_reply_when_there_are_no_answers(body):
    with pytest.raises(JevFailure):
        read_nouls(body, ["m0"])


def test_error_text_reads_every_error_shape_the_sdk_reads():
    assert error_text({"detail": {"error_type": "authentication_error", "message": "bad key"}}) == "authentication_error: bad key"
    assert error_text({"detail": [{"loc": ["body", "state"], "msg": "Field required"}]}).startswith("validation: Field required")
    assert error_text({"detail": "Not Found"}) == "Not Found"
    assert error_text({"error": "bad key"}) == "bad key"
    assert error_text({"error": {"message": "slow down", "type": "rate_limit"}}) == "rate_limit: slow down"
    assert error_text({"error": {"message": "x", "code": 400}}) == "400: x"
    assert error_text({"message": "overloaded"}) == "overloaded"
    assert error_text({"other": 1}) is None and error_text([1]) is None


def test_redact_url_hides_passwords_and_query_values():
    assert redact_url("http://user:SECRET@host:8000/api") == "http://user:***@host:8000/api"
    assert redact_url("https://TOKEN@host") == "https://***@host"
    assert redact_url("http://host/v1?key=SECRET&x=1") == "http://host/v1?key=***&x=***"
    assert redact_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000"
