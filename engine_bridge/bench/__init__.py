"""The bench: runner, machine info, statistics, the report schema and the reports."""
