"""The Compare page's runs without Qt: a run's command line and folder, its typed results,
and the texts and numbers the table, plot and progress line show."""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from backend.compare.results import CompareResult
from backend.core.units import human_bytes
from backend.jobs.events import ProgressEvent
from backend.settings import quantdesk_home

RESULTS_FILE = "results.json"
REPORT_FILE = "report.html"
PROMPTS_FILE = "prompts.txt"
# KLD bands for the colour of the KLD cell (llama.cpp folklore: < 0.01 is hard to notice).
KLD_GOOD, KLD_WARN = 0.01, 0.1
ANSWERS_STAGE = "answers"  # speed and answers: the bar holds while they run


class Outcome(StrEnum):
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


def runs_folder() -> Path:
    return quantdesk_home() / "compare"


@dataclass
class CompareRun:
    """One comparison: its folder, and once it ends, its outcome and results."""

    folder: Path
    outcome: Outcome | None = None  # None while it runs
    result: CompareResult | None = None
    gate_failures: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, root: Path | None = None) -> CompareRun:
        """A new run in a fresh folder named by the time (``_1``, ``_2``... if taken)."""
        base = (root or runs_folder()) / time.strftime("%Y%m%d-%H%M%S")
        folder, suffix = base, 1
        while folder.exists():
            folder = base.with_name(f"{base.name}_{suffix}")
            suffix += 1
        folder.mkdir(parents=True)
        return cls(folder)

    @classmethod
    def last(cls, remembered: str | None, root: Path | None = None) -> CompareRun | None:
        """The run to show on opening: the remembered one, else the newest with results.

        Raises ``OSError``, ``ValueError``, ``KeyError`` or ``TypeError`` when its results
        file cannot be read.
        """
        root = root or runs_folder()
        if remembered:
            folders = [Path(remembered)]
        elif root.is_dir():
            folders = sorted((p for p in root.iterdir() if p.is_dir()), reverse=True)
        else:
            folders = []
        for folder in folders:
            if (folder / RESULTS_FILE).is_file():
                run = cls(folder, Outcome.DONE)
                run.result = CompareResult.from_json(read_json(folder / RESULTS_FILE))
                return run
        return None

    @property
    def report(self) -> Path | None:
        path = self.folder / REPORT_FILE
        return path if path.is_file() else None

    def finished(self, payload: dict[str, Any]) -> None:
        """The job's result event: ``CompareResult`` JSON plus ``gate_failures``."""
        self.outcome = Outcome.DONE
        self.result = CompareResult.from_json(payload)
        self.gate_failures = [str(f) for f in payload.get("gate_failures") or []]


def read_json(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise TypeError(f"{path} does not hold a JSON object")
    return data


@dataclass
class CompareOptions:
    """What to compare and how: the form on the page, and the ``quantdesk compare`` line."""

    reference: str
    candidates: list[str]
    text: str = ""  # a text file; empty: the built-in text
    prompts: list[str] = field(default_factory=list)  # empty: the built-in prompts
    ctx: int = 512
    chunks: int = 0  # 0: the whole text
    answers: bool = True
    speed: bool = True
    threads: int | None = None

    def state(self) -> dict[str, Any]:
        """The options as the page remembers them (prompts one per line)."""
        return {**asdict(self), "prompts": "\n".join(self.prompts)}

    def arguments(self, folder: Path) -> list[str]:
        """The ``quantdesk`` arguments of a run writing into ``folder`` (``--progress-jsonl``
        is added by CliJob); the prompts, if any, are written there first."""
        args = [
            "compare",
            "--reference",
            self.reference,
            *self.candidates,
            "--json",
            str(folder / RESULTS_FILE),
            "--report",
            str(folder / REPORT_FILE),
            "--ctx",
            str(self.ctx),
        ]
        if self.chunks:
            args += ["--chunks", str(self.chunks)]
        if self.text:
            args += ["--text", self.text]
        if self.prompts and self.answers:
            prompts_file = folder / PROMPTS_FILE
            prompts_file.write_text("\n".join(self.prompts) + "\n", encoding="utf-8")
            args += ["--prompts", str(prompts_file)]
        if not self.answers:
            args.append("--no-answers")
        if not self.speed:
            args.append("--no-speed")
        if self.threads:
            args += ["--threads", str(self.threads)]
        return args


# -- progress ------------------------------------------------------------------------------
def progress_fraction(event: ProgressEvent) -> float | None:
    """How far the whole run is, 0..1; ``None`` while a model's speed and answers run."""
    return None if event.stage == ANSWERS_STAGE else event.fraction


def progress_status(event: ProgressEvent) -> str:
    """'Reference 3/8  ·  model.gguf', 'Candidate 2/3 1/8  ·  ...', 'Speed and answers ...'."""
    if event.stage == ANSWERS_STAGE:
        what = "Speed and answers"
    elif event.phase == 0:
        what = "Reference"
    else:
        what = f"Candidate {event.phase}/{event.phases - 1}"
    detail = f" {event.done}/{event.total}" if event.total > 1 else ""
    return f"{what}{detail}  ·  {event.message}"


# -- results -------------------------------------------------------------------------------
def fmt(value: Any, spec: str, missing: str = "–") -> str:
    """``value`` formatted by ``spec``; ``missing`` for a number not measured (None, NaN)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return missing
    return format(number, spec) if math.isfinite(number) else missing


def short_names(names: list[str]) -> list[str]:
    """Drop the prefix all names share ('SmolLM2-135M-Instruct-Q8_0' -> 'Q8_0')."""
    if len(names) < 2:
        return names
    seps = "-._ "
    prefix = names[0]
    for name in names[1:]:
        while not name.startswith(prefix):
            prefix = prefix[:-1]
    cut = len(prefix)
    if all(len(n) > cut and n[cut] in seps for n in names):
        cut += 1  # the prefix ends right before a separator in every name
    elif not (prefix and prefix[-1] in seps):
        cut = max(prefix.rfind(ch) for ch in seps) + 1
    short = [n[cut:] for n in names]
    return short if cut > 0 and all(short) else names


class Band(StrEnum):
    """How close a candidate stays to the reference (the colour of its KLD cell)."""

    REFERENCE = "reference"
    GOOD = "good"
    WARN = "warn"
    BAD = "bad"


@dataclass(frozen=True)
class Cell:
    text: str
    tip: str = ""


@dataclass(frozen=True)
class ResultRow:
    cells: list[Cell]  # in RESULT_COLUMNS order
    band: Band | None = None  # None: KLD not measured

    @property
    def texts(self) -> list[str]:
        return [c.text for c in self.cells]


RESULT_COLUMNS = ("Model", "Size", "bpw", "PPL", "PPL ratio", "KLD", "Same top %", "Gen tok/s")


def kld_band(kld: float) -> Band | None:
    if not math.isfinite(kld):
        return None
    return Band.GOOD if kld < KLD_GOOD else Band.WARN if kld < KLD_WARN else Band.BAD


def result_rows(result: CompareResult) -> list[ResultRow]:
    """The table: the reference first, then each candidate."""
    ref = result.reference
    rows = [
        ResultRow(
            [
                Cell(f"{ref.name} (ref)", f"reference: {ref.path}"),
                Cell(human_bytes(ref.size_bytes)),
                Cell(fmt(ref.bpw, ".2f")),
                Cell(fmt(ref.ppl, ".4f"), f"± {fmt(ref.ppl_unc, '.4f')}"),
                Cell("1.000"),
                Cell("0"),
                Cell("100.0"),
                Cell(fmt(ref.gen_tok_s, ".1f")),
            ],
            Band.REFERENCE,
        )
    ]
    for c in result.candidates:
        kld_tip = (
            f"p99 {fmt(c.kld_p99, '.4f')}, median {fmt(c.kld_median, '.5f')}, "
            f"max {fmt(c.kld_max, '.4f')}"
        )
        cells = [
            Cell(c.name, c.path),
            Cell(human_bytes(c.size_bytes)),
            Cell(fmt(c.bpw, ".2f")),
            Cell(fmt(c.ppl, ".4f"), f"± {fmt(c.ppl_unc, '.4f')}"),
            Cell(fmt(c.ppl_ratio, ".3f")),
            Cell(fmt(c.kld_mean, ".5f"), kld_tip),
            Cell(fmt(c.same_top_pct, ".1f"), f"RMS Δp {fmt(c.rms_dp_pct, '.2f')} %"),
            Cell(fmt(c.gen_tok_s, ".1f")),
        ]
        rows.append(ResultRow(cells, kld_band(c.kld_mean)))
    return rows


def summary_text(result: CompareResult) -> str:
    ref = result.reference
    scored = result.settings.get("scored_tokens")
    n_ctx = result.settings.get("n_ctx")
    return (
        f"Reference {ref.name}: PPL {fmt(ref.ppl, '.3f')}"
        + (f" over {int(scored):,} scored tokens" if scored else "")
        + (f", chunks of {n_ctx}" if n_ctx else "")
        + ". KLD and same-top % compare each token's full distribution with the reference's."
    )


@dataclass(frozen=True)
class KldPoint:
    size_mib: float
    kld: float
    label: str
    series: int  # the candidate's index (its colour); -1: the reference


@dataclass(frozen=True)
class KldPlot:
    """Mean KLD against file size: one point per measured candidate, the reference at 0."""

    points: list[KldPoint]
    reference: KldPoint
    x_range: tuple[float, float]
    y_top: float

    def label_to_the_right(self, point: KldPoint) -> bool:
        """Whether the point's label goes to its right (it is in the left half)."""
        lo, hi = self.x_range
        return point.size_mib <= (lo + hi) / 2


def kld_plot(result: CompareResult) -> KldPlot:
    ref = result.reference
    names = short_names([ref.name, *[c.name for c in result.candidates]])
    points = [
        KldPoint(c.size_bytes / 2**20, c.kld_mean, names[i + 1], i)
        for i, c in enumerate(result.candidates)
        if math.isfinite(c.kld_mean)
    ]
    reference = KldPoint(ref.size_bytes / 2**20, 0.0, f"{names[0]} (reference)", -1)
    xs = [p.size_mib for p in points] + [reference.size_mib]
    lo, hi = min(xs), max(xs)
    span = hi - lo or hi * 0.2 or 1.0
    top = max((p.kld for p in points), default=0.01)
    return KldPlot(points, reference, (lo - 0.15 * span, hi + 0.15 * span), top * 1.3 or 0.01)
