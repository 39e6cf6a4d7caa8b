"""Training a local S1, in packages by job: ``states`` (cut states from traces and draw the readers'
batches), ``labels`` (the readers' label files, rule labels, labelled examples and pairs), ``bank`` (the
statement bank), ``s1`` (fine-tune, fit T and cue heads, save to s1_models/); ``paths`` names every
file they read or write."""
