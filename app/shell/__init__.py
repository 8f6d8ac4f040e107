"""The application shell: entry point, main window, settings, status bar, engine worker, install helpers."""
