"""Benchmark scripts (``python -m clients.benchmarks.<name>``): measurements, not tests; results go to BENCHMARKS.md."""
