"""Training a local S1: cut states from traces, label them, fine-tune a head, fit T, save to s1_models/."""
