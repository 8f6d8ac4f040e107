"""The application shell: the entry point, the main window that wires the tabs, settings, the engine worker.
main, main_window, app_settings, settings_panel, status_bar, workers, screenshot, desktop_entry, qt_system_deps.
May import: every app package and engine_bridge (only shell imports the tabs).
"""
