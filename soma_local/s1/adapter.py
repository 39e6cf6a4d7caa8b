"""Monitor adapters: a small linear head, fitted on labels of one statement, over what an S1 already
gives and what the whole state shows.

A general S1 judges some statements less well than a strong reader does, and a user who relies on one
monitor can usually get labels for it (a reader's, another S1's scans, their own). An adapter turns
such labels into a sharper monitor without touching the S1: its inputs are the S1's calibrated logit
for the statement, logit(p), and text statistics of the state that no statement names (the phrase
cues of ``s1.cues``, the repetition, length and answer-line counts of ``s1.stats``), and its output is
the logit the monitor then uses. Because it reads only p and the text, one adapter works over any
S1 backend (classifier, LLM judge, Jev), and score caches keep holding the S1's own p.

An adapter is fitted for one exact statement and one S1 version (``S1.identity``): its weights mean
nothing for another statement's p or another model's. The file lies beside the monitor
(``<monitor>.adapters.json``, one entry per S1) and ``soma tune`` writes it. The shipped classifier's
cue heads are the same head over the cue set alone (``models.CueHead``), kept in its folder.
"""

from __future__ import annotations

import hashlib
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Literal, Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from soma_local.errors import ModelFileError, S1Error
from soma_local.jsonl import field_errors
from soma_local.s1 import cues, stats
from soma_local.s1.base import S1, S1Query, sigmoid
from soma_local.s1.state import parse_state
from soma_local.s1.wrap import WrappedS1

ADAPTER_SUFFIX = ".adapters.json"
P_CLIP = 1e-6  # p of exactly 0 or 1 (a hand label, a saturated S1) has no finite logit

# name -> (the numbers' names, how a state's (task, reasoning) gives them)
FEATURE_SETS: dict[str, tuple[tuple[str, ...], Callable[[str, str], list[float]]]] = {
    cues.CUE_SET: (cues.NAMES, lambda task, reasoning: cues.text_cues(reasoning)),
    stats.STATS_SET: (stats.NAMES, stats.state_stats),
}
DEFAULT_FEATURES = (cues.CUE_SET, stats.STATS_SET)
# What ``soma tune`` chooses among, by cross-validation: every set, the state statistics alone, or none
# (the S1's own p recalibrated, as a temperature would).
FEATURE_CHOICES = (DEFAULT_FEATURES, (stats.STATS_SET,), ())


def logit(p: float) -> float:
    p = min(max(p, P_CLIP), 1 - P_CLIP)
    return math.log(p / (1 - p))


def features(sets: Sequence[str], task: str, reasoning: str) -> list[float]:
    """The named feature sets of one state, concatenated in order."""
    return [v for name in sets for v in FEATURE_SETS[name][1](task, reasoning)]


def feature_names(sets: Sequence[str]) -> list[str]:
    return [f"{name}:{n}" for name in sets for n in FEATURE_SETS[name][0]]


def feature_columns(within: Sequence[str], sets: Sequence[str]) -> list[int]:
    """Where ``sets`` sit in an ``adapter_inputs`` row of ``within`` (column 0 is the S1's logit)."""
    out, at = [], 1
    for name in within:
        width = len(FEATURE_SETS[name][0])
        if name in sets:
            out += range(at, at + width)
        at += width
    return out


def adapter_inputs(s1: S1, statement: str, states: Sequence[tuple[str, str]], sets: Sequence[str] = DEFAULT_FEATURES,
                   on_progress: Callable[[int], None] | None = None, batch: int = 16) -> np.ndarray:
    """One row per (task, reasoning): the S1's logit for ``statement`` and the feature sets, read off the
    state that S1 reads, exactly as ``AdaptedS1`` reads them in a run. A state the S1 could not score
    is an error: a fit must not silently lose labels."""
    rows = []
    for start in range(0, len(states), batch):
        chunk = states[start : start + batch]
        probs = s1.score([S1Query(statement, task, reasoning) for task, reasoning in chunk])
        if any(p is None for p in probs):
            raise S1Error(f"{s1.name} could not score a state: {s1.last_error}")
        for (task, reasoning), p in zip(chunk, probs):
            state = s1.state_for(task, reasoning, [statement])
            rows.append([logit(p), *features(sets, *(parse_state(state) or ("", state)))])
        if on_progress:
            on_progress(start + len(chunk))
    return np.array(rows, dtype=np.float64).reshape(len(rows), 1 + len(feature_names(sets)))


class LinearOverStandardised:
    """``sum(weights * (x - mean) / scale) + bias``: the one formula of every head over text numbers
    (a monitor adapter, a classifier's cue head). The model it is mixed into declares ``mean``, ``scale``,
    ``weights`` and ``bias`` itself: fields declared here would come first in its JSON, and a released
    S1's version hashes that JSON."""

    def linear(self, x: Sequence[float]) -> float:
        w = np.asarray(self.weights) / np.asarray(self.scale)
        return float(w @ (np.asarray(x, dtype=np.float64) - np.asarray(self.mean)) + self.bias)


class HeldOutFigures(BaseModel):
    """How a head did on labels it was not fitted on."""

    model_config = ConfigDict(extra="forbid")

    n: int
    positives: int
    auroc: float
    ece: float
    log_loss: float


class AdapterReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    labels: list[str] = Field(description="the label files it was fitted from")
    n_fit: int
    n_held: int
    without: HeldOutFigures = Field(description="the S1 alone on the held-out labels")
    with_adapter: HeldOutFigures
    c: float = Field(description="inverse strength of the pull toward the S1 as it is, chosen by cross-validation")
    gain_low: float = Field(description="lower bound of the held-out log-loss gain over the S1 alone")
    created: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))


class Adapter(LinearOverStandardised, BaseModel):
    """One monitor statement's head for one S1: z' = weights . ([logit(p), features] - mean) / scale + bias."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    monitor: str
    statement: str = Field(description="the exact statement it was fitted for")
    s1: str = Field(description="S1.identity it was fitted for: name@version")
    features: list[str] = Field(description="feature sets after the S1 logit (soma_local.s1.adapter.FEATURE_SETS)")
    mean: list[float]
    scale: list[float]
    weights: list[float]
    bias: float
    report: AdapterReport

    @model_validator(mode="after")
    def _shapes(self) -> "Adapter":
        unknown = [f for f in self.features if f not in FEATURE_SETS]
        if unknown:
            raise ValueError(f"feature set(s) {', '.join(unknown)} unknown to this version of soma-local "
                             f"(known: {', '.join(FEATURE_SETS)})")
        n = 1 + len(feature_names(self.features))
        if not len(self.mean) == len(self.scale) == len(self.weights) == n:
            raise ValueError(f"mean, scale and weights need {n} values each (the logit and {n - 1} features)")
        if not all(v > 0 and math.isfinite(v) for v in self.scale):
            raise ValueError("every scale must be a finite number > 0")
        if not all(math.isfinite(v) for v in [*self.mean, *self.weights, self.bias]):
            raise ValueError("weights, mean and bias must be finite")
        return self

    @property
    def digest(self) -> str:
        """A short hash of what makes it score as it does: a calibrated h keys on it."""
        raw = self.model_dump_json(include={"statement", "s1", "features", "mean", "scale", "weights", "bias"})
        return hashlib.sha256(raw.encode()).hexdigest()[:8]

    def adjust(self, p: float, task: str, reasoning: str) -> float:
        return sigmoid(self.linear([logit(p), *features(self.features, task, reasoning)]))


class AdapterFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal[1] = 1
    adapters: list[Adapter] = Field(default_factory=list)


def adapter_file_path(monitor_file: Path) -> Path:
    """Where a monitor's adapters lie: ``looping.toml`` -> ``looping.adapters.json`` beside it."""
    return monitor_file.with_name(monitor_file.stem + ADAPTER_SUFFIX)


def read_adapter_file(path: Path) -> AdapterFile:
    """The adapters in ``path`` (none when there is no file); a corrupt file is an error naming it."""
    if not path.is_file():
        return AdapterFile()
    try:
        return AdapterFile.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        raise ModelFileError(f"{path}: not a monitor adapter file: {field_errors(exc)}") from None


def save_adapter(path: Path, adapter: Adapter) -> None:
    """Add ``adapter``, replacing one for the same statement and S1 (adapters for other S1s stay)."""
    file = read_adapter_file(path)
    file.adapters = [a for a in file.adapters if (a.statement, a.s1) != (adapter.statement, adapter.s1)] + [adapter]
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(file.model_dump_json(indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)  # a killed write never leaves half a file where a working one was


def pick_adapter(file: AdapterFile, path: Path, statement: str, s1: S1) -> tuple[Adapter | None, str | None]:
    """The adapter for this statement and S1, or None with why one in the file was refused."""
    for a in file.adapters:
        if a.s1 == s1.identity and a.statement == statement:
            return a, None
    same_s1 = [a for a in file.adapters if a.s1 == s1.identity]
    if same_s1:
        return None, (f"{path}: its adapter for {s1.identity} was fitted for another statement "
                      f"('{same_s1[0].statement}'); not used: run soma tune again")
    other = [a.s1 for a in file.adapters if a.s1.partition("@")[0] == s1.name]
    if other:
        return None, (f"{path}: its adapter was fitted for another version of {s1.name} ({other[0]}, this S1 is "
                      f"{s1.identity}); not used: run soma tune again")
    return None, None


class AdaptedS1(WrappedS1):
    """An S1 whose p for some statements passes through their adapters; every other p is the inner S1's."""

    def __init__(self, inner: S1, adapters: Mapping[str, Adapter]):
        super().__init__(inner)
        self.adapters = dict(adapters)

    def version_for(self, statement: str) -> str | None:
        adapter = self.adapters.get(statement)
        inner = self.inner.version_for(statement)
        return inner if adapter is None else f"{inner or 'v'}+adapter-{adapter.digest}"

    def score(self, queries: Sequence[S1Query]) -> list[float | None]:
        # Through the inner S1's ``score``, so a score cache below still answers; the adapter reads the
        # state that S1 read (built the same way, from the same statements).
        statements = [q.statement for q in queries]
        states: dict[tuple[str, str], str] = {}
        for q in queries:
            if q.statement in self.adapters and (q.task, q.reasoning) not in states:
                states[(q.task, q.reasoning)] = self.inner.state_for(q.task, q.reasoning, statements)
        pairs = [(q.statement, states.get((q.task, q.reasoning), "")) for q in queries]
        return self._adjust(pairs, self.inner.score(queries))

    def score_states(self, pairs: Sequence[tuple[str, str]]) -> list[float | None]:
        return self._adjust(pairs, self.inner.score_states(pairs))

    def _adjust(self, pairs: Sequence[tuple[str, str]], probs: Sequence[float | None]) -> list[float | None]:
        out: list[float | None] = []
        texts: dict[str, tuple[str, str]] = {}
        for (statement, state), p in zip(pairs, probs):
            adapter = self.adapters.get(statement)
            if adapter is None or p is None:
                out.append(p)
                continue
            if state not in texts:
                texts[state] = parse_state(state) or ("", state)
            out.append(adapter.adjust(p, *texts[state]))
        return out
