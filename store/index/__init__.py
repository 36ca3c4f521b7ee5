"""The IndexFiles: their format, the broker's IndexService queries, the index dispatcher and builder."""
