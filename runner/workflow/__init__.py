"""The workflow language: the file's model, its loader, templates, and the plan (no I/O but the loader's)."""
