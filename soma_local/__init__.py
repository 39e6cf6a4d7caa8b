"""soma-local: a System One model supervises a System Two reasoning model while it thinks."""

__version__ = "0.1.0"
