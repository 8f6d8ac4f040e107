"""Qt building blocks the tabs share, with no knowledge of any tab.
throttle, tasks (the background job pool), ring_buffer, stream_channel, ui_budget, save_dialogs, file_names (labels
that tell same-named model files apart).
May import: Qt, numpy and engine_bridge; no other app package.
"""
