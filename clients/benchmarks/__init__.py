"""Benchmark scripts (``python -m clients.benchmarks.<name>``); results go to BENCHMARKS.md."""
