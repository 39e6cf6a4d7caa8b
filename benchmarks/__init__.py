"""Measurement scripts, each run as a module of the installed project: ``python -m benchmarks.NAME``."""
