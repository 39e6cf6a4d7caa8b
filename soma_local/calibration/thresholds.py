"""Threshold calibration (paper §3.4) and the calibration file ``soma run`` reads its h from.

A takeover is irreversible, so h is chosen on calibration sets under a guard: among the thresholds of
a grid whose accuracy stays within ``delta`` of the reference (by default the same runs with no
takeover, h = inf), pick the best by an explicit objective. Choosing is pure; only the file helpers at
the bottom touch the disk.
"""

from __future__ import annotations

import math
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal, Mapping, Sequence, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from soma_local.calibration.metrics import Metrics
from soma_local.engine.monitors import Monitor, ObjectiveKind, threshold_for
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

    def value(self, m: Metrics) -> float:
        if self.kind == "fewest_tokens":
            return -m.tokens
        if m.abstention is None:
            raise DataError("the abstention objective needs unanswerable questions in the calibration set")
        return m.abstention - self.fa_weight * (m.false_abstention or 0.0)

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
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    threshold: float
    metrics: Metrics
    eligible: bool
    value: float


class Choice(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    threshold: float
    objective: Objective
    reference: Metrics
    candidates: list[Candidate]

    def refused(self) -> str | None:
        """A setting the objective prefers but the accuracy guard kept out (the nearest miss), and by how
        many questions.

        On a small calibration set one answerable question can be all that stands between a useful h and
        never taking over; the user choosing ``--delta`` or a larger set should see that, not just inf."""
        chosen = next(c for c in self.candidates if c.threshold == self.threshold)
        better = [c for c in self.candidates if not c.eligible and round(c.value, 9) > round(chosen.value, 9)]
        if not better or self.reference.accuracy is None:
            return None
        # The one the guard missed by the least: what a slightly larger delta, or one question, would change.
        nearest = min(better, key=lambda c: (-(c.metrics.accuracy or 0.0), -round(c.value, 9), c.metrics.tokens))
        ref, m = self.reference.accuracy, nearest.metrics.accuracy or 0.0
        lost = round((ref - m) * nearest.metrics.n_answerable)
        delta = math.ceil((ref - m) * 1000 - 1e-6) / 1000  # the guard's floor allows for rounding (_EPS)
        if self.objective.kind == "abstention":
            gain = f"Abs - FA {100 * nearest.value:.1f} vs {100 * chosen.value:.1f} points"
        else:
            gain = f"{-nearest.value:.0f} vs {-chosen.value:.0f} mean tokens"
        return (f"refused h={nearest.threshold:g} ({gain}): accuracy {100 * ref:.1f} -> {100 * m:.1f} %, "
                f"{lost} of {nearest.metrics.n_answerable} answerable question(s); --delta {delta:.3f} would admit it")


def _candidates(grid: Mapping[K, Metrics], objective: Objective, reference: Metrics) -> list[tuple[K, Metrics, bool, float]]:
    floor = None if reference.accuracy is None else reference.accuracy - objective.delta - _EPS
    return [
        (key, m, floor is None or (m.accuracy is not None and m.accuracy >= floor), objective.value(m))
        for key, m in sorted(grid.items())
    ]


def _best(candidates: list[tuple[K, Metrics, bool, float]], objective: Objective) -> K:
    eligible = [c for c in candidates if c[2]]
    if not eligible:
        raise DataError(f"no setting keeps accuracy within {objective.delta:g} of the reference")
    return max(eligible, key=lambda c: (round(c[3], 9), -c[1].tokens, c[0]))[0]


def choose_setting(grid: Mapping[K, Metrics], objective: Objective, reference: Metrics) -> K:
    """The rule for any tuned parameter (h, a budget, Dynasor's interval and k): the best eligible
    option by ``objective``; ties go to fewer tokens, then to the larger (more cautious) option."""
    return _best(_candidates(grid, objective, reference), objective)


def choose_threshold(
    grid: Mapping[float, Metrics], objective: Objective, reference: Metrics | None = None
) -> Choice:
    """The calibrated h, with every candidate's metrics. ``grid`` maps each h (math.inf = never take
    over) to its metrics on the calibration set; ``reference`` defaults to ``grid[inf]``, which is
    therefore always eligible."""
    if reference is None:
        if math.inf not in grid:
            raise DataError("the grid needs h = inf (no takeover) as the reference, or pass a reference")
        reference = grid[math.inf]
    candidates = _candidates(grid, objective, reference)
    return Choice(
        threshold=_best(candidates, objective),
        objective=objective,
        reference=reference,
        candidates=[Candidate(threshold=h, metrics=m, eligible=ok, value=v) for h, m, ok, v in candidates],
    )


# ---- the calibration file ---------------------------------------------------------------------------

Variant = Literal["soma", "no_reminder"]


class CalibrationEntry(BaseModel):
    """One calibrated h for (S1, S2, monitor, variant), with where its evidence lies."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="strings")

    s1: str
    s2: str
    monitor: str
    variant: Variant = "soma"
    s1_version: str | None = None  # ``S1.version`` when calibrated: a retrained S1 of the same name needs its own h
    threshold: float
    objective: Objective
    scan_interval: int
    datasets: list[str]
    n_questions: int
    results: str  # the readout results file the choice was made from
    created: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat())

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.s1, self.s2, self.monitor, self.variant)


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
    """Add or replace the entry with the same (S1, S2, monitor, variant)."""
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


def _entries(cal: CalibrationFile, s1: str, s2: str, variant: Variant) -> dict[str, CalibrationEntry]:
    return {e.monitor: e for e in cal.entries if (e.s1, e.s2, e.variant) == (s1, s2, variant)}


def _stale(entry: CalibrationEntry, s1_version: str | None) -> bool:
    """Calibrated on another version of the S1 (an entry from before versions were recorded is taken)."""
    return None not in (entry.s1_version, s1_version) and entry.s1_version != s1_version


def resolve_thresholds(
    monitors: Sequence[Monitor],
    flags: Mapping[str, float],
    cal: CalibrationFile,
    cal_path: Path,
    s1: str,
    s2: str,
    variant: Variant,
    s1_version: str | None = None,
) -> dict[str, ThresholdSource]:
    """Each monitor's h: ``--threshold`` wins, then this (S1, S2, variant)'s calibration entry, then the
    monitor's default (``threshold_for``). An entry made with another version of the S1 is not used: its h
    was chosen for probabilities this S1 no longer gives."""
    entries = _entries(cal, s1, s2, variant)
    out = {}
    for monitor in monitors:
        name, default = monitor.name, threshold_for(monitor, {})
        entry = entries.get(name)
        if name in flags:
            out[name] = ThresholdSource(h=flags[name], source="--threshold")
        elif entry is not None and _stale(entry, s1_version):
            out[name] = ThresholdSource(
                h=default, source="monitor default",
                warning=(f"{cal_path} has h for {name} calibrated with another version of {s1} ({entry.s1_version}, "
                         f"now {s1_version}): not used; recalibrate or pass --threshold"),
            )
        elif entry is not None:
            few = entry.n_questions < MIN_CALIBRATION_QUESTIONS
            out[name] = ThresholdSource(
                h=entry.threshold,
                source=f"calibration {cal_path}, {entry.n_questions} questions, {entry.created[:10]}",
                warning=(f"h for {name} was calibrated on only {entry.n_questions} question(s): it is mostly "
                         f"noise; recalibrate on >= {MIN_CALIBRATION_QUESTIONS} or pass --threshold") if few else None,
            )
        else:
            out[name] = ThresholdSource(h=default, source="monitor default")
    return out


def calibrated_thresholds(
    cal: CalibrationFile, s1: str, s2: str, monitors: list[str], variant: Variant, s1_version: str | None = None
) -> dict[str, float]:
    """The calibrated h of each monitor that has one for this S1 (this version of it) and S2."""
    found = {m: e.threshold for m, e in _entries(cal, s1, s2, variant).items() if not _stale(e, s1_version)}
    return {m: found[m] for m in monitors if m in found}
