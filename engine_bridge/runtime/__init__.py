"""The speculative runtime: the FFI over llama.cpp, the engine, generation, drafter, tree, step records."""
