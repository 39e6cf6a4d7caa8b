"""The S1 of a supervised run, loaded once for every command and the Python API: from its spec, on S2's
tokenizer where it measures in one, shared by runs in flight where there are several, and wrapped in the
adapters fitted for it beside the run's monitors."""

from __future__ import annotations

import sys
from typing import Callable, Sequence

from soma_local.engine.adapters import attach_adapters
from soma_local.engine.monitors import Monitor
from soma_local.s1.base import S1
from soma_local.s1.batched import BatchedS1
from soma_local.s1.state import TokenCounter

Warn = Callable[[str], None]


def stderr_warning(text: str) -> None:
    print(f"soma: warning: {text}", file=sys.stderr, flush=True)


def use_adapters(s1: S1 | None, monitors: Sequence[Monitor], enabled: bool = True,
                 warn: Warn = stderr_warning) -> tuple[S1 | None, list[str]]:
    """The S1 with the adapters beside these monitors (unless ``enabled`` is off: ``--no-adapters``), and
    the monitors whose adapter it uses; an adapter on disk that does not fit is refused with a warning."""
    if not enabled:
        return s1, []
    s1, used, refused = attach_adapters(s1, monitors)
    for why in refused:
        warn(why)
    return s1, used


def prepare_s1(s1: S1 | None, monitors: Sequence[Monitor], *, adapters: bool = True, batched: bool = False,
               warn: Warn = stderr_warning) -> tuple[S1 | None, list[str]]:
    """A loaded S1 made ready for runs: batched when several runs share it (``BatchedS1``), then with its
    monitors' adapters (an adapter reads each run's own p, so it sits above the batcher)."""
    if s1 is not None and batched:
        s1 = BatchedS1(s1)
    return use_adapters(s1, monitors, adapters, warn)


def load_run_s1(spec: str | None, monitors: Sequence[Monitor], *, temperature: float | None = None,
                threads: int | None = None, n_gpu_layers: int = 0, tokenizer: TokenCounter | None = None,
                adapters: bool = True, batched: bool = False,
                warn: Warn = stderr_warning) -> tuple[S1 | None, list[str]]:
    """The S1 ``spec`` names (``s1.factory``), ready for runs of ``monitors`` (``prepare_s1``), and the
    monitors whose adapter it uses. ``tokenizer``: S2's, for an S1 that measures its input in S2 tokens."""
    from soma_local.s1.factory import load_s1

    s1 = load_s1(spec, temperature=temperature, n_threads=threads, n_gpu_layers=n_gpu_layers, tokenizer=tokenizer)
    return prepare_s1(s1, monitors, adapters=adapters, batched=batched, warn=warn)
