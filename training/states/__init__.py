"""S1 states to label: cut at the engine's scan schedule from the shared traces and the embedded S2s'
runs, drawn by a fixed question split, and written to batch files for the readers."""
