"""Benchmark scripts (``python -m benchmarks.<name>``): measurements, not tests.

Results go to BENCHMARKS.md, each with the command that produced it.
"""
