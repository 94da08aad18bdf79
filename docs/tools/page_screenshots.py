"""Screenshots of the Models, Quantise and Compare pages with real content.

    QT_QPA_PLATFORM=offscreen .venv/bin/python -m docs.tools.page_screenshots \
        [--out docs/screenshots]
    QT_QPA_PLATFORM=offscreen .venv/bin/python -m docs.tools.page_screenshots \
        --size 1280x720 --out docs/screenshots/1280x720

The window is 1440x900 unless ``--size`` says otherwise.

Everything is real and offline: the Quantise page re-quantises the embedded SmolLM2
(Q8_0, Q6_K, Q4_K_M), the Compare page compares those on a short text, and the
Models page's Hub tab talks to the local Hub stand-in of the hub tests. Settings and
models go to a temporary ``QUANTDESK_HOME``. Documentation tooling, run from the
repository root (it uses the test suite's Hub stand-in and layout check); not part of the app.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from docs.tools.serving_screenshots import open_window, parse_size, wait_until

log = logging.getLogger(__name__)


def _start_hub(smollm2: Path) -> object:
    """The hub tests' stand-in, with a few GGUF repos, and huggingface_hub pointed at it."""
    from huggingface_hub import constants

    from tests.hub.hub_stand_in import HubStandIn, StandInFile, StandInRepo

    hub = HubStandIn()
    readme = StandInFile("README.md", data=b"# model card\n", lfs=False)
    files = [
        StandInFile(f"SmolLM2-135M-Instruct-{q}.gguf", source=smollm2)
        for q in ("Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_1", "Q3_K_M", "Q2_K")
    ]
    repos = [  # repo, its files, downloads, likes, gated
        ("bartowski/SmolLM2-135M-Instruct-GGUF", files, 48_213, 37, False),
        ("HuggingFaceTB/SmolLM2-135M-Instruct-GGUF", [files[4]], 21_870, 52, False),
        ("QuantFactory/SmolLM2-360M-Instruct-GGUF", [files[3]], 3_411, 9, False),
        ("unsloth/SmolLM2-1.7B-Instruct-GGUF", [files[0]], 12_094, 18, "auto"),
    ]
    for repo_id, repo_files, downloads, likes, gated in repos:
        hub.add(
            StandInRepo(
                repo_id,
                [readme, *repo_files],
                tags=["gguf", "llama"],
                library_name="gguf",
                downloads=downloads,
                likes=likes,
                gated=gated,
            )
        )
    hub.start()
    os.environ["HF_ENDPOINT"] = hub.url
    os.environ["HF_HUB_OFFLINE"] = "0"
    constants.ENDPOINT = hub.url
    constants.HUGGINGFACE_CO_URL_TEMPLATE = hub.url + "/{repo_id}/resolve/{revision}/{filename}"
    constants.HF_HUB_OFFLINE = False
    hub.throttle_s_per_chunk = 0.15
    return hub


def take(out: Path, size: tuple[int, int] = (1440, 900)) -> list[Path]:
    from backend.settings.default_model import default_model_path

    smollm2 = default_model_path()
    hub = _start_hub(smollm2)
    window = open_window(size)
    from app.pages.compare_page import ComparePage
    from app.pages.models_page import ModelsPage
    from app.pages.quantize_page import QuantizePage
    from backend.hub.library import ModelLibrary
    from tests.app.layout_check import layout_problems

    out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []

    def grab(key: str, name: str) -> None:
        window.show_page(key)
        wait_until(lambda: False, 0.5)
        for problem in layout_problems(window):
            log.warning("%s: %s", name, problem)
        path = out / f"{name}.png"
        window.grab().save(str(path))
        shots.append(path)
        log.info("saved %s", path)

    threads = str(min(4, os.cpu_count() or 1))
    quant = window.page("quantize")
    assert isinstance(quant, QuantizePage)
    window.show_page("quantize")
    wait_until(lambda: bool(quant.entries), 30)
    quant.select_library_path(str(smollm2))
    for name, check in quant.type_checks.items():
        check.setChecked(name in ("Q8_0", "Q6_K", "Q4_K_M"))
    quant.threads_spin.setValue(int(threads))
    card = quant.start()
    assert card is not None
    wait_until(lambda: not card.job.active, 300)
    card.toggle_log()
    grab("quantize", "quantize")

    compare = window.page("compare")
    assert isinstance(compare, ComparePage)
    window.show_page("compare")
    root = ModelLibrary().root
    wait_until(lambda: len(compare.entries) >= 4, 30)
    compare.set_reference(str(root / "SmolLM2-135M-Instruct-Q8_0.gguf"))
    compare.set_candidates(
        [
            str(root / "SmolLM2-135M-Instruct-Q6_K.gguf"),
            str(root / "SmolLM2-135M-Instruct-Q4_K_M.gguf"),
            str(smollm2),
        ]
    )
    compare.prompts_edit.setPlainText(
        "What is the capital of France?\nGive me three tips for writing clean Python code.\n"
        "Explain what a GGUF file is in one sentence."
    )
    compare.ctx_spin.setValue(128)
    compare.chunks_spin.setValue(8)
    compare.threads_spin.setValue(int(threads))
    compare.start()
    wait_until(lambda: compare.job is None, 900)
    grab("compare", "compare")
    compare.results.tabs.setCurrentIndex(1)
    compare.results.prompt_combo.setCurrentIndex(1)
    grab("compare", "compare-answers")
    compare.results.tabs.setCurrentIndex(0)

    models = window.page("models")
    assert isinstance(models, ModelsPage)
    window.show_page("models")
    wait_until(lambda: len(models.library.entries) >= 4, 30)
    models.library.select_path(str(root / "SmolLM2-135M-Instruct-Q4_K_M.gguf"))
    grab("models", "models")
    models.tabs.setCurrentIndex(1)
    hub_tab = models.hub
    hub_tab.search_edit.setText("SmolLM2")
    hub_tab.search()
    wait_until(lambda: hub_tab.results_list.count() > 0, 30)
    hub_tab.results_list.setCurrentRow(0)
    wait_until(lambda: "Fit:" in hub_tab.fit_note.text(), 60)
    hub_tab.files_table.selectRow(3)
    hub_tab.download_selected()
    row = hub_tab.download_list.rows[0]
    wait_until(lambda: row.bar.value() > 350, 120)
    grab("models", "models-hub")
    window.close()
    hub.stop()  # type: ignore[attr-defined]
    return shots


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"))
    parser.add_argument(
        "--size",
        type=parse_size,
        default=(1440, 900),
        help="window size in logical pixels, e.g. 1280x720",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    take(args.out, args.size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
