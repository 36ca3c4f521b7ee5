"""Benchmark scripts (``python -m clients.benchmarks.<name>``): measurements, not tests."""
