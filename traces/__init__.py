"""Bundled traces and profiles (installed as the ``kdvfs_traces`` package). Each file has a provenance note in README.md."""
