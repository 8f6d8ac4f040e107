"""The Models tab: the library of known files, the catalog, Hub search and downloads.
model_browser.
May import: app.common, app.shell (status_bar's byte formatting), engine_bridge.
"""
