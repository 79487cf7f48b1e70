"""One module per pipeline stage: paths and config in, outputs and a summary out."""
