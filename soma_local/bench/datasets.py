"""Benchmark and calibration sets: loading, their prompts, seeded sampling.

A benchmark belongs to a scenario, and its questions are prompted as that scenario's monitor file says
(``prompt_suffix``), so the bench and ``soma calibrate`` send the same prompts.

Every set is read from the data directory (``SOMA_DATA_DIR``, see ``../shared/datasets/MANIFEST.md``);
nothing is copied into the repository. GPQA-Diamond is not shipped (its authors ask that it not be
published in plain text): a user passes their own copy with ``SOMA_GPQA_FILE``.
"""

from __future__ import annotations

import os
from functools import cache
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from soma_local.calibration.runs import Question, load_questions
from soma_local.data_dir import data_dir
from soma_local.engine.monitors import Monitor, resolve_monitors
from soma_local.errors import DataError

Scenario = Literal["overthinking", "unanswerable"]

GPQA_SUFFIX = (
    "Please reason step by step, and put the letter of the correct option (A, B, C or D) within \\boxed{}."
)


@cache
def scenario_monitor(scenario: str) -> Monitor:
    """The shipped monitor a benchmark scenario is measured with."""
    (monitor,) = resolve_monitors([scenario])
    return monitor


@dataclass(frozen=True)
class Benchmark:
    name: str
    path: str  # relative to the data directory
    scenario: Scenario
    calibration: bool = False
    choices: bool = False  # multiple choice, graded by the official letter

    def prompt(self, item: Question) -> str:
        if self.choices:
            return f"{item.question}\n\n{GPQA_SUFFIX}"
        return scenario_monitor(self.scenario).prompt(item.question)


BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in [
        Benchmark("gsm8k", "overthinking/gsm8k_test.jsonl", "overthinking"),
        Benchmark("math500", "overthinking/math500_test.jsonl", "overthinking"),
        Benchmark("aime", "overthinking/aime_2024_2025.jsonl", "overthinking"),
        Benchmark("amc23", "overthinking/amc23.jsonl", "overthinking"),
        Benchmark("gpqa", "$SOMA_GPQA_FILE", "overthinking", choices=True),
        Benchmark("sum", "unanswerable/sum_test.jsonl", "unanswerable"),
        Benchmark("umwp", "unanswerable/umwp_test.jsonl", "unanswerable"),
        Benchmark("calib_over_easy", "overthinking/calib_easy.jsonl", "overthinking", calibration=True),
        Benchmark("calib_over_hard", "overthinking/calib_hard.jsonl", "overthinking", calibration=True),
        Benchmark("calib_unans_easy", "unanswerable/calib_easy.jsonl", "unanswerable", calibration=True),
        Benchmark("calib_unans_hard", "unanswerable/calib_hard.jsonl", "unanswerable", calibration=True),
    ]
}


def get_benchmark(name: str) -> Benchmark:
    try:
        return BENCHMARKS[name]
    except KeyError:
        raise DataError(f"unknown benchmark '{name}' (known: {', '.join(BENCHMARKS)})") from None


def _file(bench: Benchmark, root: Path) -> Path:
    if bench.path.startswith("$"):
        value = os.environ.get(bench.path[1:])
        if not value:
            raise DataError(
                f"benchmark '{bench.name}' is not shipped; set {bench.path[1:]} to your own JSONL copy "
                "(fields id, question with the options, answer = the correct letter)"
            )
        return Path(value)
    return root / bench.path


def load_items(bench: Benchmark, root: Path | None = None) -> list[Question]:
    """A benchmark's questions (``calibration.runs.load_questions``), labelled with the benchmark
    where the file names no source, with ids checked unique (result files are keyed by them)."""
    path = _file(bench, root or data_dir())
    if not path.is_file():
        raise DataError(f"{path}: data file for benchmark '{bench.name}' not found (set SOMA_DATA_DIR)")
    items = [q if q.source else q.model_copy(update={"source": bench.name}) for q in load_questions(path)]
    ids = [i.id for i in items]
    if len(set(ids)) != len(ids):
        raise DataError(f"{path}: item ids are not unique")
    return items
