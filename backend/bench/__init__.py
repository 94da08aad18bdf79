"""Load generator for any OpenAI-compatible server (no llama_cpp, no web framework, no Qt).

Typical use, e.g. from a GUI worker thread::

    config = BenchConfig(url="http://127.0.0.1:8080", concurrency=(1, 4))
    result = run_benchmark(config, progress=on_progress, cancel=cancel_event)
    write_results_json([result], out / "bench.json")
    write_plot([result], out / "bench.png")
"""

from backend.bench.config import BenchConfig
from backend.bench.errors import BenchCancelled, BenchError
from backend.bench.plot import write_plot
from backend.bench.report import format_table, write_json_atomic, write_results_json
from backend.bench.results import (
    BenchResult,
    LevelResult,
    RepetitionResult,
    RequestRecord,
    ScenarioResult,
)
from backend.bench.runner import BenchProgress, run_benchmark

__all__ = [
    "BenchCancelled",
    "BenchConfig",
    "BenchError",
    "BenchProgress",
    "BenchResult",
    "LevelResult",
    "RepetitionResult",
    "RequestRecord",
    "ScenarioResult",
    "format_table",
    "run_benchmark",
    "write_json_atomic",
    "write_plot",
    "write_results_json",
]
