"""Which monitor adapters a run uses: for each monitor, the one beside its file fitted for this exact
statement and this S1 (``s1.adapter``); the S1 is wrapped so every scan passes through them."""

from __future__ import annotations

from typing import Sequence

from soma_local.engine.monitors import Monitor
from soma_local.s1.adapter import AdaptedS1, adapter_file_path, pick_adapter, read_adapter_file
from soma_local.s1.base import S1


def attach_adapters(s1: S1 | None, monitors: Sequence[Monitor]) -> tuple[S1 | None, list[str], list[str]]:
    """(the S1 to run with, the monitors whose adapter it uses, why an adapter on disk was refused)."""
    if s1 is None:
        return None, [], []
    chosen, used, refused = {}, [], []
    for monitor in monitors:
        if monitor.file is None:
            continue
        path = adapter_file_path(monitor.file)
        adapter, why = pick_adapter(read_adapter_file(path), path, monitor.statement, s1)
        if adapter is not None:
            chosen[monitor.statement] = adapter
            used.append(monitor.name)
        elif why:
            refused.append(why)
    return (AdaptedS1(s1, chosen) if chosen else s1), used, refused
