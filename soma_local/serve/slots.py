"""First come, first served, with a bound: the chat server's queue in front of S2.

An in-process llama.cpp S2 holds one sequence, so supervised runs take turns; a vLLM S2 runs
``concurrency`` at once. Unlike ``soma serve``'s S1 work (many small units, shared by least attained
service in ``turns``), a chat request is one long run that cannot be split, so the fair order is the
order of arrival. Past ``max_queue`` waiting requests a new one is refused at once (``QueueFull``,
which the server answers with 429 and ``Retry-After``) rather than left to time out.

A slot is released when the run's thread has finished, never when its client leaves: a cancelled run
still holds S2 until it has stopped, and the next request must not start beside it.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from dataclasses import dataclass, field

DECAY = 0.8  # weight of the previous mean run time in the running estimate


class QueueFull(Exception):
    def __init__(self, waiting: int, retry_after: int):
        super().__init__(f"S2 is busy and its queue is full ({waiting} waiting)")
        self.waiting, self.retry_after = waiting, retry_after


@dataclass
class Slots:
    concurrency: int
    max_queue: int
    running: int = 0
    mean_seconds: float = 1.0  # running mean of a run's time, for Retry-After
    _waiting: deque[asyncio.Future] = field(default_factory=deque)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def retry_after(self) -> int:
        """Seconds until a place is likely free: the queue ahead, at the recent pace."""
        return max(1, math.ceil(self.mean_seconds * (self.waiting + 1) / self.concurrency))

    async def acquire(self) -> None:
        """Wait for a slot in arrival order. Refuses at once (before any await) when the queue is full;
        a waiter that is cancelled (its client left) leaves the queue, or passes on a slot it was given."""
        if self.running < self.concurrency and not self._waiting:
            self.running += 1
            return
        if len(self._waiting) >= self.max_queue:
            raise QueueFull(len(self._waiting), self.retry_after())
        granted = asyncio.get_running_loop().create_future()
        self._waiting.append(granted)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self.release()
            elif granted in self._waiting:
                self._waiting.remove(granted)
            raise

    def release(self, seconds: float | None = None) -> None:
        """Give the slot to the longest waiter (``running`` stays), or free it; ``seconds`` is how long the
        run took."""
        if seconds is not None:
            self.mean_seconds = DECAY * self.mean_seconds + (1 - DECAY) * seconds
        while self._waiting:
            granted = self._waiting.popleft()
            if not granted.done():
                granted.set_result(None)
                return
        self.running -= 1
