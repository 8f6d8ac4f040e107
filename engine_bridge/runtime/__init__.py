"""The speculative runtime: llama.cpp through a thin FFI, the engine, its loop and what it reports.
FFI (llama_ffi, native, llama_log), engine + config, the loop (generation, drafter, tree), records, step costs, auto mode.
May import: common; models only through the engine's pre-flight (engine.preflight -> models.compat, in the function); not bench, cli.
"""
