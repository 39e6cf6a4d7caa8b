"""Benchmarks: datasets, methods, the resumable runner, reports and the trace viewer."""
