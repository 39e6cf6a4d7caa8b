"""The chat server's queue in front of S2 (``serve.slots``), without models: arrival order, the bound, a
waiter that leaves, and a slot that passes straight to the next waiter."""

import asyncio

import pytest

from soma_local.serve.chat_events import finish_reason
from soma_local.serve.slots import QueueFull, Slots


def test_waiters_get_the_slot_in_arrival_order_and_the_bound_refuses_at_once():
    async def scenario() -> list[int]:
        slots = Slots(concurrency=1, max_queue=3)
        order: list[int] = []
        await slots.acquire()  # held by "the running request"

        async def waiter(i: int) -> None:
            await slots.acquire()
            order.append(i)
            slots.release(0.5)

        tasks = [asyncio.create_task(waiter(i)) for i in range(3)]
        await asyncio.sleep(0)  # let all three queue
        assert slots.waiting == 3
        with pytest.raises(QueueFull) as full:
            await slots.acquire()
        assert full.value.retry_after >= 1 and "queue is full" in str(full.value)
        slots.release(2.0)
        await asyncio.gather(*tasks)
        assert slots.running == 0 and slots.waiting == 0
        return order

    assert asyncio.run(scenario()) == [0, 1, 2]


def test_a_cancelled_waiter_leaves_the_queue_and_a_granted_one_passes_the_slot_on():
    async def scenario() -> None:
        slots = Slots(concurrency=1, max_queue=2)
        await slots.acquire()
        first = asyncio.create_task(slots.acquire())
        second = asyncio.create_task(slots.acquire())
        await asyncio.sleep(0)
        first.cancel()  # its client left while waiting
        await asyncio.gather(first, return_exceptions=True)
        assert slots.waiting == 1
        slots.release()
        await second  # the slot went past the one that left
        assert slots.running == 1
        slots.release()
        assert slots.running == 0

    asyncio.run(scenario())


def test_an_http_s2_runs_concurrency_at_once():
    async def scenario() -> None:
        slots = Slots(concurrency=2, max_queue=1)
        await slots.acquire()
        await slots.acquire()  # a second run beside the first (vLLM)
        third = asyncio.create_task(slots.acquire())
        await asyncio.sleep(0)
        assert slots.running == 2 and slots.waiting == 1 and not third.done()
        with pytest.raises(QueueFull):
            await slots.acquire()
        slots.release()
        await third
        assert slots.running == 2 and slots.waiting == 0

    asyncio.run(scenario())


@pytest.mark.parametrize("stop,generated,limit,expected", [
    ("answer", 40, 64, "stop"),
    ("answer", 64, 64, "length"),  # the answer used every token asked for
    ("takeover", 30, None, "stop"),
    ("eos_in_thinking", 10, 64, "stop"),
    ("limit", 64, 64, "length"),
    ("limit", 2000, None, "length"),  # the context ran out
])
def test_finish_reason_maps_somas_stop(stop, generated, limit, expected):
    assert finish_reason(stop, generated, limit) == expected
