"""S2 runtimes: token-level pause, insert and rollback behind one interface (``base.S2Backend``)."""
