"""The Bench tab: autoregressive vs speculative on a prompt suite, with sweeps and exports.
bench_view.
May import: app.common, engine_bridge.
"""
