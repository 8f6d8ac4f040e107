"""The pairing panel: target and drafter slots, the compatibility report, the K/V advisor.
pairing_panel, compat_view, kv_advisor.
May import: app.common, engine_bridge.
"""
