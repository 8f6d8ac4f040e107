"""The Models tab: the library, the catalog, Hub search and downloads."""
