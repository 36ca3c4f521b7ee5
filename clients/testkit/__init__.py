"""The test kit: an in-process writable server, its pytest fixtures, the demo store and stores made from
JSON lines."""
