"""Turns on one worker for many requests, so a light request never waits behind a heavy one.

``soma serve`` has one S1 worker thread; each request runs as a series of small work units (plan,
then batches of S1 pairs), and before each unit it waits for its turn here. The next turn goes to the
job that has had the least S1 work so far (least attained service), so a one-question request, which
has had none, goes before every request that is already being scored, and waits at most for the unit
in progress. So heavy requests still progress while light ones keep coming, the job that has waited
longest gets the turn instead whenever such "aged" turns have used less than ``share`` of the recent
worker time. A request planned to need more than one unit counts as having had work from its plan
on, so a burst of one-question requests is not queued behind the first unit of each heavy request
that came with it. The choice is a pure function (``pick``); ``Turns`` holds the asyncio side.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import AsyncIterator, Sequence

DEFAULT_SHARE = 0.25  # of the worker's recent time that aged turns (the longest waiter) may take
DECAY = 0.9  # per unit: the ledger remembers roughly the last ten units


@dataclass(eq=False)
class Job:
    seq: int
    done: int = 0  # S1 tokens scored so far
    since: float = 0.0  # when it began waiting for its current turn


@dataclass
class Ledger:
    """Recent worker time, split by how the turn was chosen."""

    aged: float = 0.0
    total: float = 0.0

    def add(self, seconds: float, aged: bool) -> None:
        self.aged = self.aged * DECAY + (seconds if aged else 0.0)
        self.total = self.total * DECAY + seconds


def pick(waiting: Sequence[Job], ledger: Ledger, share: float = DEFAULT_SHARE) -> tuple[Job, bool]:
    """The job whose unit runs next, and whether it was chosen for having waited longest."""
    least = min(waiting, key=lambda j: (j.done, j.seq))
    oldest = min(waiting, key=lambda j: (j.since, j.seq))
    if oldest is not least and ledger.aged <= share * ledger.total:
        return oldest, True
    return least, False


@dataclass
class Turns:
    share: float = DEFAULT_SHARE
    ledger: Ledger = field(default_factory=Ledger)
    _waiting: dict[Job, asyncio.Future] = field(default_factory=dict)
    _busy: bool = False
    _seq: itertools.count = field(default_factory=itertools.count)

    def job(self) -> Job:
        return Job(seq=next(self._seq))

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @asynccontextmanager
    async def turn(self, job: Job) -> AsyncIterator[None]:
        """Hold the worker for one unit of ``job``. A cancelled waiter leaves the queue; a cancelled
        holder passes the turn on."""
        job.since = time.monotonic()
        aged = False
        if self._busy or self._waiting:
            granted = asyncio.get_running_loop().create_future()
            self._waiting[job] = granted
            try:
                aged = await granted
            except asyncio.CancelledError:
                self._waiting.pop(job, None)
                if granted.done() and not granted.cancelled():  # the turn was ours already
                    self._next()
                raise
        else:
            self._busy = True
        started = time.monotonic()
        try:
            yield
        finally:
            self.ledger.add(time.monotonic() - started, aged)
            self._next()

    def _next(self) -> None:
        for job in [j for j, f in self._waiting.items() if f.done()]:  # cancelled, not yet cleaned up
            del self._waiting[job]
        if not self._waiting:
            self._busy = False
            return
        job, aged = pick(list(self._waiting), self.ledger, self.share)
        self._waiting.pop(job).set_result(aged)
