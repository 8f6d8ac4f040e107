"""Shared by every part of engine_bridge and the app: typed errors, data paths, resources, SQLite opening."""
