"""The "Local server" switch: the loaded pair behind engine_bridge.serve's OpenAI-compatible API,
its requests run by the app's own engine worker in turn with chat turns.
server_settings (host, port, key, queue in QSettings), engine_jobs (the server's queue, run on the
engine worker), local_server (start / stop, counters, served steps to the plots and profiler),
server_panel (the switch and its settings).
May import: common, shell (the engine worker) and engine_bridge.
"""
