"""The pairing panel: target and drafter slots, the compatibility report, the K/V advisor.
pairing_panel, compat_view, kv_advisor, first_start (the first start's offer: fetch the default target, choose a GGUF, or the built-in pair).
May import: app.common, engine_bridge.
"""
