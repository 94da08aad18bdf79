"""User-facing errors of the quality comparison (``quantdesk compare``)."""

from __future__ import annotations

from backend.core.errors import QuantDeskError
from backend.jobs.errors import JobCancelledError


class CompareError(QuantDeskError):
    """Base class of every error raised by :mod:`backend.compare`."""


class ModelLoadError(CompareError):
    """llama.cpp could not load a GGUF or create a context for it."""


class DecodeError(CompareError):
    """``llama_decode`` failed while evaluating a model."""


class EvaluationTextError(CompareError):
    """The evaluation text is missing, unreadable or too short for the context size."""

    exit_code = 2


class IncompatibleModelsError(CompareError):
    """A candidate does not share the reference's vocabulary."""


class BaseLogitsError(CompareError):
    """The stored reference log-probabilities are missing or do not match this run."""


class CompareCancelledError(JobCancelledError, CompareError):
    """The user cancelled the comparison."""


class GateFailedError(CompareError):
    """A candidate exceeded ``--max-kld`` or ``--max-ppl-ratio``."""

    exit_code = 5
