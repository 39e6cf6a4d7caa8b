"""A run's events as an iterator: the run goes on a thread of its own and hands each event over as it
happens; the iterator ends with the run's result. A caller that stops reading cancels the run, so no
S2 keeps generating for nobody."""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Callable, Iterator, Union

from soma_local.engine.events import Listener, Piece, ThinkingClosed
from soma_local.engine.trace import Branch, Reminder, RunEnd, RunStart, Scan, Takeover
from soma_local.supervisor.result import SupervisedRun

# What ``Supervisor.stream`` yields (and ``on_event`` hears), in the run's order; a ``SupervisedRun`` last.
Event = Union[Piece, ThinkingClosed, RunStart, Scan, Reminder, Takeover, Branch, RunEnd]


@dataclass(frozen=True)
class _Finished:
    run: SupervisedRun | None
    error: BaseException | None


def stream_events(start: Callable[[Listener, threading.Event], SupervisedRun],
                  cancel: threading.Event | None = None) -> Iterator[Event | SupervisedRun]:
    """The events of ``start(listener, cancel)``, run on its own thread once iteration begins; an error
    it raises is raised here. ``cancel`` (or one of its own) is set when the caller stops early."""
    cancel = cancel or threading.Event()
    inbox: queue.SimpleQueue = queue.SimpleQueue()

    def work() -> None:
        try:
            inbox.put(_Finished(start(inbox.put, cancel), None))
        except BaseException as exc:  # noqa: BLE001 - handed to the reading thread, which raises it
            inbox.put(_Finished(None, exc))

    def events() -> Iterator[Event | SupervisedRun]:
        thread = threading.Thread(target=work, name="soma-stream", daemon=True)
        thread.start()
        finished = False
        try:
            while not finished:
                item = inbox.get()
                if isinstance(item, _Finished):
                    finished = True
                    if item.error is not None:
                        raise item.error
                    yield item.run
                else:
                    yield item
        finally:
            if not finished:
                cancel.set()
            thread.join()

    return events()
