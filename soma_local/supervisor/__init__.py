"""The Python API: ``Supervisor`` loads S2, S1 and the monitors once and supervises runs on them; the
events a run makes and its result are named here too, so a caller imports from one place."""

from soma_local.engine.events import Piece, ThinkingClosed
from soma_local.engine.trace import Branch, Reminder, RunEnd, RunStart, Scan, Takeover
from soma_local.supervisor.result import SupervisedRun
from soma_local.supervisor.streaming import Event
from soma_local.supervisor.supervisor import DEFAULT_MONITORS, Supervisor

__all__ = ["DEFAULT_MONITORS", "Branch", "Event", "Piece", "Reminder", "RunEnd", "RunStart", "Scan",
           "SupervisedRun", "Supervisor", "Takeover", "ThinkingClosed"]
