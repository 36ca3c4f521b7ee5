"""Benchmark scripts (``python -m clients.benchmarks.<name>``): measurements, not tests.

Results go to BENCHMARKS.md, each with the command that produced it.
"""
