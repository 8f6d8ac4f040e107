"""The speculative runtime: llama.cpp through a thin FFI, the engine, its loop and what it reports.
FFI (llama_ffi, native, llama_log), engine + config, the loop (generation, drafter, tree), records, step costs, auto mode.
May import: common only (not models, bench, cli): the pairing checks come from the caller (Engine.load(preflight=...), runtime.preflight).
"""
