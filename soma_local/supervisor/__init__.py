"""The Python API: ``Supervisor`` loads S2, S1 and the monitors once and supervises runs on them."""

from soma_local.supervisor.result import SupervisedRun
from soma_local.supervisor.streaming import Event
from soma_local.supervisor.supervisor import DEFAULT_MONITORS, Supervisor

__all__ = ["DEFAULT_MONITORS", "Event", "SupervisedRun", "Supervisor"]
