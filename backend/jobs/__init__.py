"""Long jobs (quantise, compare, bench): progress and the ``--progress-jsonl`` protocol."""
