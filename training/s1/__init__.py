"""Training a local S1 on labelled states: the fine-tuning loop, the trainers, cue heads and model cards."""
