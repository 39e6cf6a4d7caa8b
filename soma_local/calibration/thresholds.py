"""Threshold calibration (paper §3.4) and the calibration file ``soma run`` reads its h from.

A takeover is irreversible, so h is chosen on calibration sets under a guard: among the thresholds of
a grid whose accuracy stays within ``delta`` of the reference (the same runs with no takeover,
h = inf), pick the best by an explicit objective. Calibration sets are small, so by default "best" and
"within delta" are judged by confidence bounds from a paired bootstrap of the calibration questions
(``selection``): an h must beat h = inf with confidence, and the accuracy it could lose is its upper
bound, not its point estimate. The paper's point rule stays available (``Selection(rule="point")``).
``choose_threshold`` is the one place h is chosen (``soma calibrate``, ``soma replay``, the bench), and
``resolve_thresholds`` the one place a run's h is picked (a typed h, else the calibration file's, else the
monitor file's default) for ``soma run`` and ``soma replay``. Choosing is pure; only the file helpers at the
bottom touch the disk.
"""

from __future__ import annotations

import math
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal, Mapping, Sequence, TypeVar

import numpy as np
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from soma_local.calibration.metrics import ItemResult, Metrics, summarize
from soma_local.calibration.selection import EPS, Changes, Effects, Selection, aligned, effects
from soma_local.engine.monitors import Monitor, ObjectiveKind
from soma_local.engine.supervise import MODES
from soma_local.errors import DataError

_EPS = 1e-12
K = TypeVar("K")


class Objective(BaseModel):
    """What "best" means for one monitor.

    ``fewest_tokens`` (overthinking): the lowest mean token count. ``abstention`` (unanswerable): the
    highest ``abstention - fa_weight * false_abstention``. Either way a threshold is eligible only if
    its accuracy on answerable questions is at least the reference's minus ``delta`` (a fraction; the
    paper uses 0). Ties go to fewer tokens, then to the larger (more cautious) h.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ObjectiveKind
    delta: float = Field(default=0.0, ge=0.0)
    fa_weight: float = Field(default=1.0, ge=0.0)

    def _of(self, abstention, false_abstention, tokens):
        """The objective from its rates: floats for a setting's value, or arrays of the rates' changes for
        its gain (the objective is linear in the rates, so its gain is its value at their changes)."""
        if self.kind == "fewest_tokens":
            return -tokens
        if abstention is None:
            raise DataError("the abstention objective needs unanswerable questions in the calibration set")
        return abstention - self.fa_weight * (0.0 if false_abstention is None else false_abstention)

    def value(self, m: Metrics) -> float:
        return self._of(m.abstention, m.false_abstention, m.tokens)

    def gain(self, changes: Changes) -> np.ndarray:
        """The objective's gain over the reference, per resample and setting (``selection.effects``)."""
        return self._of(changes.abstention, changes.false_abstention, changes.tokens)

    def describe(self) -> str:
        goal = "fewest tokens" if self.kind == "fewest_tokens" else f"max Abs - {self.fa_weight:g}*FA"
        return f"{goal}, accuracy within {self.delta:g} of the reference"


def monitor_objective(monitor: Monitor, delta: float = 0.0, fa_weight: float = 1.0) -> Objective:
    """The objective a monitor's file names (``objective``), with the accuracy guard's tolerance."""
    if monitor.objective is None:
        raise DataError(f"monitor '{monitor.name}' names no objective: set objective = \"fewest_tokens\" or "
                        "\"abstention\" in its file, or pass --objective")
    return Objective(kind=monitor.objective, delta=delta, fa_weight=fa_weight)


# The thresholds calibration tries (math.inf, never take over, is always added). Each scan adds
# logit(p) to the evidence, so a trace an S1 reads at p = 0.8 for ten scans holds 14: a grid that
# stops at 8 leaves every h between 8 and inf untried, and calibration jumps from "take over" to
# "never" on a set where takeovers at h = 8 still happen.
H_GRID: tuple[float, ...] = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0)


class Candidate(BaseModel):
    """One h on the calibration questions: its metrics, the objective's point value, its effects against
    h = inf with their bounds, and whether the accuracy guard (as the selection rule reads it) admits it."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    threshold: float
    metrics: Metrics
    eligible: bool
    value: float
    effects: Effects


class Choice(BaseModel):
    """The calibrated h with every candidate's evidence, and the words that explain it."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    threshold: float
    objective: Objective
    selection: Selection
    reference: Metrics
    candidates: list[Candidate]

    @property
    def chosen(self) -> Candidate:
        return next(c for c in self.candidates if c.threshold == self.threshold)

    def score(self, c: Candidate) -> float:
        """What the rule ranks by: the point value, or the lower bound of the gain over h = inf."""
        return c.value if self.selection.rule == "point" else c.effects.gain.low

    def loss(self, c: Candidate) -> float:
        """What the guard holds to ``delta``: accuracy lost at the point, or its upper bound."""
        if self.selection.rule == "point":
            return (self.reference.accuracy or 0.0) - (c.metrics.accuracy or 0.0)
        return -c.effects.accuracy.low if c.effects.accuracy is not None else 0.0

    @property
    def level(self) -> str:
        return f"{100 * self.selection.confidence:g} %"

    def evidence(self) -> str:
        """What the calibration questions say about the chosen h, as the commands print it and the run
        header shows it: its gain and false-abstention change with their bounds, or why h = inf."""
        if why := self.why_reference():
            return why
        return f"{self.chosen.effects.describe(self.objective.kind)} ({self.level} bounds)"

    def why_reference(self) -> str | None:
        """Why no h was taken over h = inf (None when one was)."""
        if not math.isinf(self.threshold):
            return None
        others = [c for c in self.candidates if c.threshold != self.threshold and c.eligible]
        n = self.reference.n
        if not others:
            guard = "its upper bound" if self.selection.rule == "bound" else "the point estimate"
            return f"no h keeps accuracy within --delta {self.objective.delta:g} of h=inf ({guard}, {n} questions)"
        best = max(others, key=lambda c: (round(c.effects.gain.point, 9), -c.metrics.tokens, c.threshold))
        kept_out = any(not c.eligible and c.effects.gain.point > EPS for c in self.candidates)
        if best.effects.gain.point <= EPS:
            return f"no h{' the guard admits' if kept_out else ''} gains over h=inf on these {n} questions"
        # (The point rule takes any admitted h that gains, so only the bound rule gets here.)
        admitted = " the guard admits" if self.refused() else ""
        return (f"no h{admitted} beats h=inf with {self.level} confidence on these {n} questions (the best, "
                f"h={best.threshold:g}: {best.effects.describe(self.objective.kind)}; its gain's lower bound is "
                "not above 0)")

    def refused(self) -> str | None:
        """A setting the objective prefers but the accuracy guard kept out (the nearest miss), and by how
        much.

        On a small calibration set one answerable question can be all that stands between a useful h and
        never taking over; the user choosing ``--delta`` or a larger set should see that, not just inf."""
        chosen = self.chosen
        better = [c for c in self.candidates if not c.eligible and round(self.score(c), 9) > round(self.score(chosen), 9)]
        if not better or self.reference.accuracy is None:
            return None
        # The one the guard missed by the least: what a slightly larger delta, or one question, would change.
        nearest = min(better, key=lambda c: (round(self.loss(c), 9), -round(self.score(c), 9), c.metrics.tokens))
        ref, m = self.reference.accuracy, nearest.metrics.accuracy or 0.0
        lost = round((ref - m) * nearest.metrics.n_answerable)
        delta = math.ceil(self.loss(nearest) * 1000 - 1e-6) / 1000  # the guard's floor allows for rounding (_EPS)
        if self.selection.rule == "bound":
            gain = nearest.effects.describe(self.objective.kind)
            bound = f", up to {100 * self.loss(nearest):.1f} points lost at the {self.level} bound"
        elif self.objective.kind == "abstention":
            gain, bound = f"Abs - FA {100 * nearest.value:.1f} vs {100 * chosen.value:.1f} points", ""
        else:
            gain, bound = f"{-nearest.value:.0f} vs {-chosen.value:.0f} mean tokens", ""
        return (f"refused h={nearest.threshold:g} ({gain}): accuracy {100 * ref:.1f} -> {100 * m:.1f} %, "
                f"{lost} of {nearest.metrics.n_answerable} answerable question(s){bound}; "
                f"--delta {delta:.3f} would admit it")


def _within(loss: float, objective: Objective) -> bool:
    """The accuracy guard: a loss (point or bound) no larger than ``delta`` (rounding allowed for)."""
    return loss <= objective.delta + _EPS


def _best(options: Sequence[tuple[K, float, float]]) -> K:
    """The best (key, score, tokens): the highest score; ties go to fewer tokens, then to the larger
    (more cautious) key."""
    return max(options, key=lambda o: (round(o[1], 9), -o[2], o[0]))[0]


def choose_setting(grid: Mapping[K, Metrics], objective: Objective, reference: Metrics) -> K:
    """The paper's point rule for a tuned baseline parameter (a budget, Dynasor's interval and k): the
    best eligible option by ``objective`` against the untuned run, which need not be an option. h is
    chosen by ``choose_threshold``, which knows how few questions decided it."""
    ok = [
        (key, objective.value(m), m.tokens) for key, m in sorted(grid.items())
        if reference.accuracy is None or (m.accuracy is not None and _within(reference.accuracy - m.accuracy, objective))
    ]
    if not ok:
        raise DataError(f"no setting keeps accuracy within {objective.delta:g} of the reference")
    return _best(ok)


def choose_threshold(
    outcomes: Mapping[float, Sequence[ItemResult]], objective: Objective, selection: Selection = Selection()
) -> Choice:
    """The calibrated h, with every candidate's metrics and effects. ``outcomes`` maps each h of the grid
    to its per-question outcomes on the calibration questions, aligned by question; h = inf (never take
    over) is the reference and must be there.

    ``selection.rule == "bound"``: an h is eligible when the upper bound of the accuracy it loses against
    h = inf is within ``objective.delta``; among eligible ones whose gain has a lower bound above 0, the
    highest lower bound wins; none: h = inf (``Choice.why_reference`` says why). ``"point"``: the paper's
    rule on point estimates. Either way ties go to fewer tokens, then to the larger h."""
    if math.inf not in outcomes:
        raise DataError("the grid needs h = inf (no takeover) as the reference")
    reference_items = outcomes[math.inf]
    if not reference_items:
        raise DataError("no calibration questions to choose h on")
    aligned(outcomes, reference_items)
    hs = sorted(outcomes)
    metrics = {h: summarize(outcomes[h]) for h in hs}
    fx = dict(zip(hs, effects([outcomes[h] for h in hs], reference_items, objective.gain, selection)))
    choice = Choice(
        threshold=math.inf, objective=objective, selection=selection, reference=metrics[math.inf],
        candidates=[Candidate(threshold=h, metrics=metrics[h], eligible=False, value=objective.value(metrics[h]),
                              effects=fx[h]) for h in hs],
    )
    for c in choice.candidates:
        c.eligible = choice.reference.accuracy is None or _within(choice.loss(c), objective)
    contenders = [c for c in choice.candidates if c.eligible and (
        selection.rule == "point" or math.isinf(c.threshold) or c.effects.gain.low > EPS)]
    choice.threshold = _best([(c.threshold, choice.score(c), c.metrics.tokens) for c in contenders])
    return choice


# ---- the calibration file ---------------------------------------------------------------------------

# The run modes (``engine.supervise.MODES``) that take over at h, each with its own calibrated h; every other
# mode reads one of theirs (``calibrated_mode``).
CalibratedMode = Literal["soma", "no_reminder"]


class CalibrationEntry(BaseModel):
    """One calibrated h for (S1, S2, monitor, mode), with where its evidence lies."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    s1: str
    s2: str
    monitor: str
    # Written as "mode"; files from before the rename call it "variant" and still load.
    mode: CalibratedMode = Field(default="soma", validation_alias=AliasChoices("mode", "variant"))
    s1_version: str | None = None  # ``S1.version`` when calibrated: a retrained S1 of the same name needs its own h
    threshold: float
    objective: Objective
    scan_interval: int
    datasets: list[str]
    n_questions: int
    results: str  # the readout results file the choice was made from
    created: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat())
    # How h was chosen and what the calibration questions said about it (absent in files written before
    # selection knew its sample size; such an entry still loads and is used as it is).
    selection: Selection | None = None
    effects: Effects | None = None  # the chosen h against h = inf, with bounds
    evidence: str | None = None  # ``Choice.evidence()``: the effects in words, or why h = inf

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.s1, self.s2, self.monitor, self.mode)

    @classmethod
    def from_choice(cls, choice: Choice, **fields) -> CalibrationEntry:
        """The entry for a choice: its h, objective, rule, effects and evidence, plus where it was made."""
        return cls(threshold=choice.threshold, objective=choice.objective, selection=choice.selection,
                   effects=choice.chosen.effects, evidence=choice.evidence(), **fields)


class CalibrationFile(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    version: Literal[1] = 1
    entries: list[CalibrationEntry] = Field(default_factory=list)


def calibration_path(path: str | Path | None = None) -> Path:
    """``--calibration``, else $SOMA_CALIBRATION, else ./calibration/thresholds.json."""
    return Path(path or os.environ.get("SOMA_CALIBRATION") or "calibration/thresholds.json")


def load_calibration(path: Path) -> CalibrationFile:
    if not path.is_file():
        return CalibrationFile()
    try:
        return CalibrationFile.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise DataError(f"{path}: not a calibration file: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}") from None


def save_entry(path: Path, entry: CalibrationEntry) -> None:
    """Add or replace the entry with the same (S1, S2, monitor, mode)."""
    cal = load_calibration(path)
    cal.entries = [e for e in cal.entries if e.key != entry.key] + [entry]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(cal.model_dump_json(indent=2) + "\n", encoding="utf-8")


# Fewer calibration questions than this give an h that is mostly noise: `soma calibrate` does not
# write such an h to the calibration file unless asked, and `soma run` warns when it reads one.
MIN_CALIBRATION_QUESTIONS = 20


class ThresholdSource(BaseModel):
    """One monitor's h for a run and where it came from, as the run header states it."""

    model_config = ConfigDict(frozen=True)

    h: float
    source: str
    warning: str | None = None
    evidence: str | None = None  # from the calibration entry: the gain and FA change with their bounds

    def describe(self) -> str:
        """Where h came from and, for a calibrated h, what its calibration questions said about it."""
        return f"{self.source}; {self.evidence}" if self.evidence else self.source


def _entries(cal: CalibrationFile, s1: str, s2: str, mode: CalibratedMode) -> dict[str, CalibrationEntry]:
    return {e.monitor: e for e in cal.entries if (e.s1, e.s2, e.mode) == (s1, s2, mode)}


def _stale(entry: CalibrationEntry, s1_version: str | None) -> bool:
    """Calibrated on another version of the S1 (an entry from before versions were recorded is taken)."""
    return None not in (entry.s1_version, s1_version) and entry.s1_version != s1_version


def calibrated_mode(mode: str) -> CalibratedMode:
    """The mode whose calibration entry a run of this mode (``engine.supervise.MODES``) takes its h from: a run
    with reminders takes soma's, one without no_reminder's (a readout run branches where that run would take over)."""
    reminders, _ = MODES[mode]
    return "soma" if reminders else "no_reminder"


def open_calibration(path: str | None) -> tuple[CalibrationFile, Path]:
    """The calibration file ``--calibration`` names (``calibration_path``), read now so that a broken one is
    refused before any model loads; a missing one is empty."""
    found = calibration_path(path)
    return load_calibration(found), found


def resolve_thresholds(
    monitors: Sequence[Monitor],
    flags: Mapping[str, float],
    cal: CalibrationFile,
    cal_path: Path,
    s1: str,
    s2: str,
    mode: str,
    s1_version: str | None | Mapping[str, str | None] = None,
    chosen: Mapping[str, ThresholdSource] | None = None,
) -> dict[str, ThresholdSource]:
    """Each monitor's h for a run of ``mode``, the one place it is picked: ``--threshold`` (``flags``, as the
    user typed them) wins, then an h the command chose itself (``chosen``: ``soma replay --calibrate-share``),
    then this (S1, S2, mode)'s calibration entry, then the monitor file's ``default_threshold``.

    An entry made with another version of the S1 is not used: its h was chosen for probabilities this S1 no
    longer gives. ``s1_version`` may differ per monitor (by name): a monitor adapter changes its monitor's p,
    and so the version its h keys on (``S1.version_for``), so an h calibrated without the adapter is not used
    with it."""
    entries = _entries(cal, s1, s2, calibrated_mode(mode))
    chosen = chosen or {}
    out = {}
    for monitor in monitors:
        name, default = monitor.name, monitor.default_threshold
        version = s1_version.get(name) if isinstance(s1_version, Mapping) else s1_version
        entry = entries.get(name)
        if name in flags:
            out[name] = ThresholdSource(h=flags[name], source="--threshold")
        elif name in chosen:
            out[name] = chosen[name]
        elif entry is not None and _stale(entry, version):
            out[name] = ThresholdSource(
                h=default, source="monitor default",
                warning=(f"{cal_path} has h for {name} calibrated with another version of {s1} ({entry.s1_version}, "
                         f"now {version}): not used; recalibrate or pass --threshold"),
            )
        elif entry is not None:
            few = entry.n_questions < MIN_CALIBRATION_QUESTIONS
            out[name] = ThresholdSource(
                h=entry.threshold,
                source=f"calibration {cal_path}, {entry.n_questions} questions, {entry.created[:10]}",
                evidence=entry.evidence,
                warning=(f"h for {name} was calibrated on only {entry.n_questions} question(s): it is mostly "
                         f"noise; recalibrate on >= {MIN_CALIBRATION_QUESTIONS} or pass --threshold") if few else None,
            )
        else:
            out[name] = ThresholdSource(h=default, source="monitor default")
    return out
