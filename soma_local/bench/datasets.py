"""Benchmark question sets, the monitor each is measured with, and their prompts.

A benchmark is a question set measured with one monitor (its *scenario*): the monitor file's
``prompt_suffix`` ends every question, SOMA runs that monitor, the file's ``calibration_data`` are
the sets its parameters are tuned on, its ``benchmarks`` the sets its table reports, and its
``objective`` picks the table's metrics. So any monitor file, shipped or a user's, is benchmarked the
same way, and the bench and ``soma calibrate`` send the same prompts.

The shipped sets have names (``SETS``); a monitor file or ``--benchmark`` may also name a JSONL file
by path. Every set is read from the data directory (``SOMA_DATA_DIR``, see
``../shared/datasets/MANIFEST.md``); nothing is copied into the repository. GPQA-Diamond is not shipped
(its authors ask that it not be published in plain text): a user passes their own copy with
``SOMA_GPQA_FILE``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from soma_local.calibration.runs import Question, load_questions
from soma_local.data_dir import data_dir
from soma_local.engine.monitors import Monitor, resolve_monitors
from soma_local.errors import DataError

GPQA_SUFFIX = (
    "Please reason step by step, and put the letter of the correct option (A, B, C or D) within \\boxed{}."
)


@dataclass(frozen=True)
class QuestionSet:
    """A question file. ``monitor``: the shipped monitor its questions were chosen for, which a run
    that names no monitor measures it with."""

    name: str
    path: str  # relative to the data directory, absolute, or $VARIABLE naming a user's copy
    monitor: str | None = None
    choices: bool = False  # multiple choice, graded by the official letter


SETS: dict[str, QuestionSet] = {
    s.name: s
    for s in [
        QuestionSet("gsm8k", "overthinking/gsm8k_test.jsonl", "overthinking"),
        QuestionSet("math500", "overthinking/math500_test.jsonl", "overthinking"),
        QuestionSet("aime", "overthinking/aime_2024_2025.jsonl", "overthinking"),
        QuestionSet("amc23", "overthinking/amc23.jsonl", "overthinking"),
        QuestionSet("gpqa", "$SOMA_GPQA_FILE", "overthinking", choices=True),
        QuestionSet("sum", "unanswerable/sum_test.jsonl", "unanswerable"),
        QuestionSet("umwp", "unanswerable/umwp_test.jsonl", "unanswerable"),
        QuestionSet("calib_over_easy", "overthinking/calib_easy.jsonl", "overthinking"),
        QuestionSet("calib_over_hard", "overthinking/calib_hard.jsonl", "overthinking"),
        QuestionSet("calib_unans_easy", "unanswerable/calib_easy.jsonl", "unanswerable"),
        QuestionSet("calib_unans_hard", "unanswerable/calib_hard.jsonl", "unanswerable"),
    ]
}


def question_set(ref: str) -> QuestionSet:
    """A set by name, or a JSONL file by path (a shipped set's path gives that set, under its name)."""
    if ref in SETS:
        return SETS[ref]
    if not ref.endswith(".jsonl"):
        raise DataError(f"unknown benchmark '{ref}' (known: {', '.join(SETS)}; or a .jsonl question file)")
    for known in SETS.values():
        if known.path == ref:
            return known
    name = Path(ref).stem
    if name in SETS:  # results are filed by set name: two sets under one name would mix
        raise DataError(f"{ref}: a question file named like the shipped benchmark '{name}'; rename the file")
    return QuestionSet(name, ref)


@dataclass(frozen=True)
class Benchmark:
    """A question set measured with one monitor."""

    questions: QuestionSet
    monitor: Monitor

    @property
    def name(self) -> str:
        return self.questions.name

    @property
    def scenario(self) -> str:
        return self.monitor.name

    @property
    def choices(self) -> bool:
        return self.questions.choices

    @property
    def home(self) -> bool:
        """Measured with the monitor it was chosen for: its results keep the flat layout of the paper's."""
        return self.questions.monitor == self.monitor.name

    def prompt(self, item: Question) -> str:
        if self.choices:
            return f"{item.question}\n\n{GPQA_SUFFIX}"
        return self.monitor.prompt(item.question)


def get_benchmark(ref: str, monitor: Monitor | None = None) -> Benchmark:
    """A set measured with ``monitor``, or with the shipped monitor it was chosen for."""
    questions = question_set(ref)
    if monitor is None:
        if questions.monitor is None:
            raise DataError(f"benchmark '{ref}': name the monitor it measures (--monitor NAME or FILE.toml)")
        (monitor,) = resolve_monitors([questions.monitor])
    return Benchmark(questions, monitor)


def monitor_benchmarks(monitor: Monitor) -> list[Benchmark]:
    """A monitor's calibration sets and then its test sets, as its file lists them."""
    refs = list(dict.fromkeys([*monitor.calibration_data, *monitor.benchmarks]))
    if not refs:
        raise DataError(f"monitor '{monitor.name}' lists no calibration_data or benchmarks in its file; "
                        "name the sets with --benchmark")
    return [get_benchmark(ref, monitor) for ref in refs]


def check_objective(monitor: Monitor) -> None:
    """The bench picks a monitor's table and baselines by its objective: one without is refused, by file."""
    if monitor.objective is None:
        raise DataError(f"monitor '{monitor.name}' ({monitor.file or 'no file'}) names no objective; set "
                        "objective = \"fewest_tokens\" or \"abstention\" in its file: the bench picks its "
                        "table and baselines by it")


def plan_benchmarks(refs: Iterable[str], monitors: Iterable[Monitor]) -> list[Benchmark]:
    """What ``soma bench run`` measures: each named set with each named monitor; with no monitor,
    each set with its own; with no set, each monitor's own sets."""
    refs, monitors = list(refs), list(monitors)
    if not monitors:
        benchmarks = [get_benchmark(ref) for ref in refs]
    elif not refs:
        benchmarks = [b for m in monitors for b in monitor_benchmarks(m)]
    else:
        benchmarks = [get_benchmark(ref, m) for m in monitors for ref in refs]
    for bench in benchmarks:
        check_objective(bench.monitor)
    paths: dict[tuple[str, str], str] = {}
    for bench in benchmarks:  # results are filed by set name: two files under one name would mix
        path = paths.setdefault((bench.scenario, bench.name), bench.questions.path)
        if path != bench.questions.path:
            raise DataError(f"two question files named '{bench.name}' ({path}, {bench.questions.path}); "
                            "rename one")
    return benchmarks


def _file(questions: QuestionSet, root: Path) -> Path:
    if questions.path.startswith("$"):
        value = os.environ.get(questions.path[1:])
        if not value:
            raise DataError(
                f"benchmark '{questions.name}' is not shipped; set {questions.path[1:]} to your own JSONL copy "
                "(fields id, question with the options, answer = the correct letter)"
            )
        return Path(value)
    return root / questions.path


def load_items(bench: Benchmark, root: Path | None = None) -> list[Question]:
    """A benchmark's questions (``calibration.runs.load_questions``), labelled with the benchmark
    where the file names no source, with ids checked unique (result files are keyed by them)."""
    path = _file(bench.questions, root or data_dir())
    if not path.is_file():
        raise DataError(f"{path}: data file for benchmark '{bench.name}' not found (set SOMA_DATA_DIR)")
    items = [q if q.source else q.model_copy(update={"source": bench.name}) for q in load_questions(path)]
    ids = [i.id for i in items]
    if len(set(ids)) != len(ids):
        raise DataError(f"{path}: item ids are not unique")
    return items
