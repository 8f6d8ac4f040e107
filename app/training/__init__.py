"""The Train tab: train a DFlash drafter for a target, follow it, cancel it, load the pair.
train_panel.
May import: app.common, app.chat (describe_error), engine_bridge (training).
"""
