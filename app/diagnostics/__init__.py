"""Diagnostics: the live plots and the per-step profiler table."""
