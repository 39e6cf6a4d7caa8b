"""One S1 shared by many runs in flight: their scans go through the model in one forward pass.

With N supervised runs against an S2 server, scans arrive from N threads. Each thread builds its
states itself (one at a time: tokenizers are not thread-safe), queues its pairs and waits; whichever
thread gets the model next scores everything queued by then in one batch. No thread waits for a
batch to fill: a scan that arrives while the model is busy simply rides the next forward pass, so
batching costs no latency and grows with load (continuous batching, as the S2 server does).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Sequence

from soma_local.s1.base import S1
from soma_local.s1.wrap import WrappedS1


@dataclass
class _Job:
    pairs: Sequence[tuple[str, str]]
    done: threading.Event = field(default_factory=threading.Event)
    probs: list[float | None] | None = None
    error: str | None = None
    exc: BaseException | None = None


class BatchedS1(WrappedS1):
    def __init__(self, inner: S1):
        super().__init__(inner)
        self._queue_lock = threading.Lock()
        self._model_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._queue: list[_Job] = []
        self._local = threading.local()
        self.batch_sizes: list[int] = []  # scans (calls) per forward pass, for the benchmarks

    @property
    def last_error(self) -> str | None:  # per thread: each run reports its own scan's failure
        return getattr(self._local, "error", None)

    @last_error.setter
    def last_error(self, value: str | None) -> None:
        self._local.error = value

    def state_for(self, task: str, reasoning: str, statements: Sequence[str]) -> str:
        with self._state_lock:
            return self.inner.state_for(task, reasoning, statements)

    def score_states(self, pairs: Sequence[tuple[str, str]]) -> list[float | None]:
        job = _Job(list(pairs))
        with self._queue_lock:
            self._queue.append(job)
        while not job.done.is_set():
            with self._model_lock:
                if job.done.is_set():
                    break
                with self._queue_lock:
                    jobs, self._queue = self._queue, []
                self._forward(jobs)
        if job.exc is not None:
            raise job.exc
        self.last_error = job.error
        return job.probs

    def _forward(self, jobs: list[_Job]) -> None:
        if not jobs:
            return
        flat = [p for job in jobs for p in job.pairs]
        try:
            probs = self.inner.score_states(flat) if flat else []
            error = self.inner.last_error
        except Exception as exc:  # noqa: BLE001 - each run's loop turns it into its own failed scan
            for job in jobs:
                job.exc = exc
                job.done.set()
            return
        self.batch_sizes.append(len(jobs))
        start = 0
        for job in jobs:
            job.probs = probs[start : start + len(job.pairs)]
            job.error = error if any(p is None for p in job.probs) else None
            start += len(job.pairs)
            job.done.set()
