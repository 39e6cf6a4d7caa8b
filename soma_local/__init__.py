"""soma-local: a System One model supervises a System Two reasoning model while it thinks.

``from soma_local import Supervisor`` is the Python API (``soma_local.supervisor``, docs/python-api.md).
It is looked up on first use, so importing the package (as every command and module does) loads none of
the layers above the ground one."""

__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "Supervisor":
        from soma_local.supervisor import Supervisor

        return Supervisor
    raise AttributeError(f"module 'soma_local' has no attribute '{name}'")
