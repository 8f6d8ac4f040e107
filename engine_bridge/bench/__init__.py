"""The bench: autoregressive vs speculative on prompt suites, its statistics, schema and reports.
runner, machine, suites, stats, schema, report (the model, text formats), report_html (uses report), export (files).
May import: common, runtime, models; never cli or training.
"""
