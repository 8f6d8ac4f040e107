"""Model files from their headers: inspection, pairing checks, conversion, the Hub, the library, synthetic models.
gguf_header, modelinfo, dflash_names, llama_facts, compat, pair_preflight, convert, convert_quant, hub, library, registry_models, synth, demo.
May import: common; runtime only for the pairing checks (compat: runtime.config, runtime.llama_ffi in a function); not bench, cli.
"""
