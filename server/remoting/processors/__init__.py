"""The request processors: one module per broker processor the query server stands in for."""
