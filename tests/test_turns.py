"""Turns on the one S1 worker: least work first, the longest waiter within its share, cancellation."""

import asyncio

from soma_local.serve.turns import Job, Ledger, Turns, pick
from waiting import DEADLINE


def test_the_job_with_the_least_work_goes_first_and_ties_keep_arrival_order():
    heavy, light, later = Job(seq=0, done=5000, since=0.0), Job(seq=1, since=5.0), Job(seq=2, since=6.0)
    assert pick([heavy, light, later], Ledger(aged=1.0, total=1.0)) == (light, False)


def test_the_longest_waiter_gets_a_turn_while_aged_turns_are_under_their_share():
    heavy, light = Job(seq=0, done=5000, since=0.0), Job(seq=1, since=5.0)
    assert pick([heavy, light], Ledger(aged=0.2, total=1.0), share=0.25) == (heavy, True)
    assert pick([heavy, light], Ledger(aged=0.3, total=1.0), share=0.25) == (light, False)


def test_a_light_job_waits_for_one_unit_of_a_heavy_one_and_cancelled_waiters_leave():
    """Each step waits for the state it needs (a unit held, two waiters queued), never for a sleep: a
    sleep's timer and the unit's would race whenever a loaded machine delays the event loop."""
    order: list[str] = []

    async def run(turns: Turns, job: Job, name: str, units: int, first_held: asyncio.Event | None = None) -> None:
        for _ in range(units):
            async with turns.turn(job):
                order.append(name)
                if first_held is not None:  # the first unit lasts until the test lets it end
                    await first_held.wait()
                    first_held = None
            job.done += 100

    async def until(condition) -> None:
        async def passes() -> None:
            while not condition():
                await asyncio.sleep(0)  # one pass of the event loop, no clock

        await asyncio.wait_for(passes(), DEADLINE)  # a bug that never lets it hold fails, not hangs

    async def main() -> None:
        turns = Turns(share=0.0)
        release = asyncio.Event()
        heavy = asyncio.ensure_future(run(turns, turns.job(), "heavy", 5, release))
        await until(lambda: order == ["heavy"])  # heavy holds its first unit
        gone = asyncio.ensure_future(run(turns, turns.job(), "gone", 1))
        light = asyncio.ensure_future(run(turns, turns.job(), "light", 1))
        await until(lambda: turns.waiting == 2)
        gone.cancel()
        await until(lambda: turns.waiting == 1)
        release.set()
        await asyncio.gather(heavy, light, gone, return_exceptions=True)
        assert turns.waiting == 0 and not turns._busy

    asyncio.run(main())
    assert order == ["heavy", "light", "heavy", "heavy", "heavy", "heavy"]
