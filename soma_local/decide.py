"""Jev questions answered by any S1 backend: one statement per noul question, option or score level.

An S1 judges one statement about one state. A noul question is one statement; a choice or score
question becomes one statement per option or level ("instructions" + "Answer: option"), each scored
by the same S1 and normalised into a distribution. Each question is scored on its own, from its own
text only, so an answer cannot depend on its id, its siblings or their order (jevcompat SPEC 7).
"""

from __future__ import annotations

from typing import Sequence

from soma_local.errors import SomaError
from soma_local.jevwire import (
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
from soma_local.s1.base import S1
from soma_local.state import longest_tokens, parse_state


class S1Unavailable(SomaError):
    """The S1 gave no usable probability (a failed backend): a server fault, not the caller's."""


class StateTooLong(SomaError):
    """A state that is not an S1 state and does not fit the S1's input limit."""


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


def statements(question: NoulQuestion | ChoiceQuestion | ScoreQuestion) -> list[str]:
    if isinstance(question, NoulQuestion):
        return [noul_statement(question)]
    if isinstance(question, ChoiceQuestion):
        return [
            option_statement(question.instructions, name if desc is None else f"{name} ({as_text(desc)})")
            for name, desc in question.criteria.items()
        ]
    return [option_statement(question.instructions, as_text(level)) for level in question.criteria]


def normalise(probs: Sequence[float]) -> list[float]:
    """Scale per-option probabilities to sum to 1 (uniform when the S1 gave every option 0)."""
    total = sum(probs)
    if total <= 0:
        return [1.0 / len(probs)] * len(probs)
    return [p / total for p in probs]


def make_answer(question: NoulQuestion | ChoiceQuestion | ScoreQuestion, probs: Sequence[float]) -> Answer:
    """The Jev answer from the S1's probability for each statement of ``statements(question)``."""
    if isinstance(question, NoulQuestion):
        return NoulAnswer(noul=probs[0])
    dist = normalise(probs)
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


def fit_state(s1: S1, state: str, statements: Sequence[str]) -> str:
    """The state as this S1 will read it, or StateTooLong when state and questions cannot fit.

    An S1 state (``Task: Q\\n\\nReasoning so far: H``, what our Jev adapter sends) is cut to this
    S1's own input limit the SOMA way: task kept whole, oldest reasoning dropped. Any other state is
    read as-is if it fits and refused if it does not, because no cut of arbitrary text is safe. Room
    is kept for the longest statement of the request, so all its questions read the same state.
    """
    room = s1.input_limit - longest_tokens(statements, s1.tokenizer) - s1.template_tokens
    parsed = parse_state(state)
    if parsed is not None:
        state = s1.state_for(*parsed, statements)
    tokens = len(s1.tokenizer.encode(state))
    if tokens > room:
        raise StateTooLong(
            f"state ({tokens} tokens) and the longest question do not fit this S1 ({s1.name}): "
            f"it reads at most {s1.input_limit} tokens, {max(0, room)} left for the state"
        )
    return state


def answer_request(s1: S1, request: SystemOneRequest, model: str) -> SystemOneResponse:
    """Answer every question of a request with ``s1``, one S1 call per question."""
    text = as_text(request.state)
    per_question = {qid: statements(q) for qid, q in request.questions.items()}
    every = [s for sts in per_question.values() for s in sts]
    state = fit_state(s1, text, every)
    answers: dict[str, Answer] = {}
    for qid, question in request.questions.items():
        sts = per_question[qid]
        probs = s1.score_states([(s, state) for s in sts])
        bad = [p for p in probs if not is_probability(p)]
        if len(probs) != len(sts) or bad:
            raise S1Unavailable(f"S1 {s1.name} gave no usable probability ({s1.last_error or bad[:1]})")
        answers[qid] = make_answer(question, probs)
    tok = s1.tokenizer
    usage = Usage(input_tokens=len(tok.encode(state)) + sum(len(tok.encode(s)) for s in every), output_tokens=0)
    return SystemOneResponse(model=model, answers=answers, usage=usage)
