"""The base every wing stands on: errors, limits, settings, the host adapter, off-loop work."""
