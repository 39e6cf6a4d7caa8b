"""Jev questions answered by any S1 backend: one statement per noul question, option or score level.

An S1 judges one statement about one state. A noul question is one statement; a choice or score
question becomes one statement per distinct option or level ("instructions" + "Answer: option"), each
scored by the same S1 and normalised into a distribution. Each question is scored on its own, from its
own text only, so an answer cannot depend on its id, its siblings or their order (jevcompat SPEC 7).

The answer types agree with each other by construction wherever the structure of the question decides
(``read_question``): a choice or score whose two options are yes and no (or true and false) is the noul
question of its instructions, so it gets exactly the noul's P(yes); an option is its description (the
id is only a label), so renaming options changes nothing; options that read the same are one event whose
probability they share, so a cloned option takes half of its original's and leaves the others alone;
and each option is scored on its own, so adding, removing or reordering options moves the rest only by
renormalisation. What only the S1's reading can make true (a merged option "either A or B" getting
P(A) + P(B), the parts of a split option adding up) is left to the S1: forcing it here would mean
parsing the option's words.

A state longer than the S1 reads at once is read in overlapping windows (``state_windows``): evenly
spaced, the first at the state's start and the last at its end, neighbours sharing a quarter of a
window. A statement's probability is then the sigmoid of its mean log-odds over the windows. That
keeps P(not A) = 1 - P(A) whenever each window does, gives every part of the state the same weight,
and equals the S1's own probability when the state fits one window. It works for any backend: it
only needs the S1's tokenizer and input limit. An S1 state (``Task: ...\n\nReasoning so far: ...``)
is instead cut the SOMA way, newest reasoning kept, exactly as the local loop reads it.

``plan_request`` does the cheap part (tokenizing, windows, limits) and lists the (statement, window)
pairs to score, so a server can score them in small batches between other requests' batches;
``finish`` turns their probabilities into the answers.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

from soma_local.errors import SomaError
from soma_local.s1.jev_wire import (
    Answer,
    ChoiceAnswer,
    ChoiceQuestion,
    NoulAnswer,
    NoulQuestion,
    ScoreAnswer,
    ScoreQuestion,
    SystemOneRequest,
    SystemOneResponse,
    Text,
    Usage,
    as_text,
    choice_confidence,
    is_probability,
    score_confidence,
)
from soma_local.s1.base import S1, sigmoid
from soma_local.s1.state import from_boundary, parse_state, to_boundary

MAX_STATE_TOKENS = 4096  # hosted Jev reads 2,048 tokens; twice that leaves room for finer tokenizers
MAX_REQUEST_TOKENS = 1 << 17  # S1 input tokens one request may cost: 255 options over a full window
MIN_WINDOW_TOKENS = 64  # less room than this beside a question is no reading of a long state
MIN_PAIR_COST = 64  # each S1 call costs at least this many tokens' time, however short its text
_SURROGATE = re.compile("[\ud800-\udfff]")


class S1Unavailable(SomaError):
    """The S1 gave no usable probability (a failed backend): a server fault, not the caller's."""


class StateTooLong(SomaError):
    """A request this server will not read: a state over the limit, a question that leaves no room
    for the state, or more S1 work than one request may cost (HTTP 413)."""


@dataclass(frozen=True)
class Limits:
    """What one request may ask of the S1, in the S1's own tokens."""

    max_state_tokens: int = MAX_STATE_TOKENS
    max_request_tokens: int = MAX_REQUEST_TOKENS


def readable(text: str) -> str:
    """Text a tokenizer can take: a lone UTF-16 surrogate (valid in JSON, not in UTF-8) becomes U+FFFD.

    Only what the S1 reads is changed; ids and option names go back to the caller exactly as sent.
    """
    return _SURROGATE.sub("\ufffd", text)


def noul_statement(question: NoulQuestion) -> str:
    """The instructions, then whatever the criteria say a true or false answer means.

    With instructions alone the statement is the instructions verbatim, so a monitor sent as a noul
    question is judged exactly as the local S1 judges it.
    """
    parts = [] if question.instructions is None else [as_text(question.instructions)]
    criteria = question.criteria
    if criteria is not None:
        if criteria.true is not None:
            parts.append(f"True if: {as_text(criteria.true)}")
        if criteria.false is not None:
            parts.append(f"False if: {as_text(criteria.false)}")
    return "\n".join(parts)


def option_statement(instructions: Text | None, option: str) -> str:
    answer = f"Answer: {option}"
    return answer if instructions is None else f"{as_text(instructions)}\n{answer}"


Question = NoulQuestion | ChoiceQuestion | ScoreQuestion
_YES, _NO = {"yes", "true"}, {"no", "false"}


@dataclass(frozen=True)
class Reading:
    """How a question is read: the distinct statements the S1 judges and how the answer follows.

    ``options[i]`` is the statement index option (or level) i stands for; ``yes_no`` marks a two-option
    yes/no question, read as the one statement of its instructions (options: none for a noul)."""

    statements: list[str]
    options: list[int] = field(default_factory=list)
    yes_no: tuple[int, int] | None = None  # (yes option, no option)


def _option_texts(question: ChoiceQuestion | ScoreQuestion) -> list[str]:
    """What each option says: a choice option's description (its id where it has none), a score level."""
    if isinstance(question, ChoiceQuestion):
        return [name if desc is None else as_text(desc) for name, desc in question.criteria.items()]
    return [as_text(level) for level in question.criteria]


def _yes_no(texts: Sequence[str]) -> tuple[int, int] | None:
    plain = [re.sub(r"[^a-z]", "", t.lower()) for t in texts]
    if len(plain) == 2 and {plain[0] in _YES, plain[1] in _YES} == {True, False} and set(plain) <= _YES | _NO:
        return (0, 1) if plain[0] in _YES else (1, 0)
    return None


def read_question(question: Question) -> Reading:
    if isinstance(question, NoulQuestion):
        return Reading([noul_statement(question)])
    texts = _option_texts(question)
    yes_no = _yes_no(texts)
    if yes_no is not None and question.instructions is not None:
        return Reading([noul_statement(NoulQuestion(type="noul", instructions=question.instructions))], yes_no=yes_no)
    distinct = list(dict.fromkeys(option_statement(question.instructions, t) for t in texts))
    return Reading(distinct, [distinct.index(option_statement(question.instructions, t)) for t in texts])


def normalise(probs: Sequence[float]) -> list[float]:
    """Scale per-option probabilities to sum to 1 (uniform when the S1 gave every option 0)."""
    total = sum(probs)
    if total <= 0:
        return [1.0 / len(probs)] * len(probs)
    return [p / total for p in probs]


def distribution(reading: Reading, probs: Sequence[float]) -> list[float]:
    """Each option's probability from the S1's probability of each distinct statement: a yes/no pair
    gets (p, 1 - p); otherwise the statements' probabilities are normalised over the events and an event
    read by several options is shared among them equally."""
    if reading.yes_no is not None:
        yes, no = reading.yes_no
        return [probs[0] if i == yes else 1.0 - probs[0] for i in range(2)]
    events, shares = normalise(probs), Counter(reading.options)
    return [events[e] / shares[e] for e in reading.options]


def make_answer(question: Question, reading: Reading, probs: Sequence[float]) -> Answer:
    """The Jev answer from the S1's probability for each statement of ``reading``."""
    if isinstance(question, NoulQuestion):
        return NoulAnswer(noul=probs[0])
    dist = distribution(reading, probs)
    if isinstance(question, ChoiceQuestion):
        names = list(question.criteria)
        best = max(range(len(names)), key=lambda i: dist[i])
        return ChoiceAnswer(
            choice=names[best],
            probabilities=dict(zip(names, dist)),
            confidence=choice_confidence(dist),
        )
    return ScoreAnswer(
        score=sum(i * p for i, p in enumerate(dist)),
        legend={str(i): level for i, level in enumerate(question.criteria)},
        probabilities={str(i): p for i, p in enumerate(dist)},
        confidence=score_confidence(dist),
    )


class _Tokens:
    """Token counts of one request's texts, each text encoded once."""

    def __init__(self, s1: S1):
        self.s1, self._ids = s1, {}

    def ids(self, text: str) -> list[int]:
        if text not in self._ids:
            self._ids[text] = self.s1.tokenizer.encode(text)
        return self._ids[text]

    def count(self, text: str) -> int:
        return len(self.ids(text))


def state_windows(ids: Sequence[int], decode, room: int) -> list[str]:
    """Overlapping windows of ``room`` tokens over a state of ``ids`` tokens (see the module doc).

    Inner cuts move to the nearest word boundary; the overlap makes sure nothing falls between.
    """
    stride = room - room // 4
    n = math.ceil((len(ids) - room) / stride) + 1
    starts = [round(k * (len(ids) - room) / (n - 1)) for k in range(n)]
    windows = []
    for k, start in enumerate(starts):
        text = decode(ids[start : start + room])
        if k > 0:
            text = from_boundary(text)
        if k < n - 1:
            text = to_boundary(text)
        windows.append(text)
    return windows


def _fit_windows(tokens: _Tokens, state: str, room: int) -> list[str]:
    """``state_windows`` whose re-encoded length fits ``room`` (decoding can change the tokens)."""
    ids = tokens.ids(state)
    size = room
    for _ in range(4):
        windows = state_windows(ids, tokens.s1.tokenizer.decode, size)
        over = max(tokens.count(w) for w in windows) - room
        if over <= 0:
            return windows
        size -= over + 1
    return windows  # still a token or two over: the backend's own truncation takes that last bit


def pair_cost(tokens: int) -> int:
    """What scoring one (statement, window) pair counts against a request's limit: its S1 input
    tokens, but never less than MIN_PAIR_COST, so 20,000 one-word questions are not cheap."""
    return max(tokens, MIN_PAIR_COST)


def mean_log_odds(probs: Sequence[float]) -> float:
    """The windows' probabilities combined into one: sigmoid of their mean log-odds."""
    if len(probs) == 1:
        return probs[0]
    clipped = [min(max(p, 1e-9), 1 - 1e-9) for p in probs]  # a 0 or 1 keeps finite log-odds
    return sigmoid(sum(math.log(p / (1 - p)) for p in clipped) / len(clipped))


@dataclass
class Plan:
    """What the S1 must score for one request: distinct (statement, state window) pairs, and for each
    question and statement the pairs whose probabilities make its answer."""

    model: str
    pairs: list[tuple[str, str]] = field(default_factory=list)
    costs: list[int] = field(default_factory=list)  # what each pair counts against the limit (pair_cost)
    questions: dict[str, tuple[Question, Reading, list[list[int]]]] = field(default_factory=dict)
    input_tokens: int = 0
    cost: int = 0  # sum of costs

    def pair(self, statement: str, window: str, cost: int, index: dict[tuple[str, str], int]) -> int:
        key = (statement, window)
        if key not in index:
            index[key] = len(self.pairs)
            self.pairs.append(key)
            self.costs.append(cost)
            self.cost += cost
        return index[key]


def plan_request(s1: S1, request: SystemOneRequest, model: str, limits: Limits = Limits()) -> Plan:
    """Tokenize, cut or window the state for each question, check the limits (StateTooLong), and list
    the pairs to score.

    Each question gets windows as large as its own longest statement allows, so its answer does not
    depend on its siblings. An S1 state is cut once for the request, the SOMA way, with room for the
    longest statement of any question (as the local loop cuts it for all monitors of a pause).
    """
    tokens = _Tokens(s1)
    text = readable(as_text(request.state))
    readings = {qid: read_question(q) for qid, q in request.questions.items()}
    per_question = {qid: [readable(s) for s in r.statements] for qid, r in readings.items()}
    every = [s for sts in per_question.values() for s in sts]
    parsed = parse_state(text)
    if parsed is not None:
        text = s1.state_for(*parsed, every)
    state_tokens = tokens.count(text)
    if parsed is None and state_tokens > limits.max_state_tokens:
        raise StateTooLong(
            f"state is {state_tokens} tokens; this server reads states up to {limits.max_state_tokens} tokens"
        )
    plan = Plan(model=model, input_tokens=state_tokens + sum(tokens.count(s) for s in every))
    index: dict[tuple[str, str], int] = {}
    windows_by_room: dict[int, list[str]] = {}
    for qid, question in request.questions.items():
        sts = per_question[qid]
        longest = max(tokens.count(s) for s in sts)
        # An S1 state was cut to the S1's input limit above; other text is windowed at what one pair reads.
        limit = s1.input_limit if parsed is not None else (s1.reads_at_once or s1.input_limit)
        room = limit - s1.reserve(sts)
        if state_tokens <= room:
            windows = [text]
        elif room < MIN_WINDOW_TOKENS or parsed is not None:
            raise StateTooLong(
                f"question {qid!r} has a {longest}-token statement: with the state ({state_tokens} tokens) "
                f"it does not fit this S1 ({s1.name}), which reads at most {limit} tokens"
            )
        else:
            if room not in windows_by_room:
                windows_by_room[room] = _fit_windows(tokens, text, room)
            windows = windows_by_room[room]
        rows = [
            [plan.pair(s, w, pair_cost(tokens.count(s) + tokens.count(w) + s1.template_tokens), index) for w in windows]
            for s in sts
        ]
        plan.questions[qid] = (question, readings[qid], rows)
        if plan.cost > limits.max_request_tokens:
            break
    if plan.cost > limits.max_request_tokens:
        raise StateTooLong(
            f"this request needs more than {limits.max_request_tokens} S1 input tokens (options x state "
            f"windows, {plan.cost} counted so far); send fewer options or questions, or a shorter state"
        )
    return plan


def finish(plan: Plan, probs: Sequence[float | None], s1: S1) -> SystemOneResponse:
    """The response from the S1's probability for each of ``plan.pairs``."""
    bad = [p for p in probs if not is_probability(p)]
    if len(probs) != len(plan.pairs) or bad:
        raise S1Unavailable(f"S1 {s1.name} gave no usable probability ({s1.last_error or bad[:1]})")
    answers: dict[str, Answer] = {}
    for qid, (question, reading, rows) in plan.questions.items():
        answers[qid] = make_answer(question, reading, [mean_log_odds([probs[i] for i in row]) for row in rows])
    return SystemOneResponse(model=plan.model, answers=answers, usage=Usage(input_tokens=plan.input_tokens, output_tokens=0))

