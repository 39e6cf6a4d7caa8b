"""Serving layer: the local S1 behind a Jev-compatible /v1/systemone."""
