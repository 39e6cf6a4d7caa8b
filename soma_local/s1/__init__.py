"""Awareness layer: S1 backends behind one interface (see ``base.S1``)."""

from soma_local.s1.base import S1, S1Query

__all__ = ["S1", "S1Query"]
