"""Waiting for a condition, never for a length of time.

The suite shares its machine with other work (a 2-core CI box, builds, other suites), so a test that
sleeps a fixed time, polls a fixed number of times or reads a file the moment its name appears passes
alone and fails under load. ``wait_for`` waits for the thing the test checks. Its deadline is generous
because it only bounds a real failure (a server that never answers, a download that never completes):
a passing test returns as soon as the condition holds and never comes near it.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")
DEADLINE = 300.0  # seconds; far beyond any passing wait, even beside another CPU-heavy job


def wait_for(condition: Callable[[], T], what: str, *, timeout: float = DEADLINE,
             unless: Callable[[], str | None] | None = None, interval: float = 0.05) -> T:
    """Call ``condition`` until it returns something truthy, and return that.

    ``unless`` is checked between polls and returns why waiting is pointless (the process that would
    make the condition true has exited, say), or None; the wait then fails at once with that reason
    instead of at the deadline. Either failure is an AssertionError naming ``what``.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        reason = unless() if unless is not None else None
        if reason:
            raise AssertionError(f"gave up waiting for {what}: {reason}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout:g} s")
        time.sleep(interval)
