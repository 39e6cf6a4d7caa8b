"""How many CPU threads a model runs on when the user does not say: one policy for S2 (llama.cpp) and the
classifier S1 (torch), which share the machine's cores in one process."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """Cores this process may run on (a container or taskset may allow fewer than the machine has)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def default_threads() -> int:
    """CPU threads when --threads is not given: half the usable cores, at least one.

    llama.cpp's OpenMP threads meet at a barrier after every operation and spin while they wait, so
    when they take every core, whatever else runs (the terminal showing the stream, another program)
    stalls all of them: on 2 cores, 2 threads decoded 3x slower than 1 on a quiet machine and 7-15x
    slower on a busy one (``benchmarks/threads.py``). Half the cores also approximates the physical
    cores on machines with two hardware threads per core, which is what llama.cpp itself uses."""
    return max(1, usable_cores() // 2)
