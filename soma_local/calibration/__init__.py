"""Calibration layer: single-run readout, threshold choice, readout runs, trace replay, metrics and reports."""
