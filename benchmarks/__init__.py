"""Benchmarks against peers; run each as ``python -m benchmarks.<name>`` from the repo root."""
