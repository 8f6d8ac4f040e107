"""Per-step diagnostics of the running pair.
live_plots (pyqtgraph), profiler_view (the per-step table and its exports).
May import: app.common, engine_bridge.
"""
