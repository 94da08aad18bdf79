"""Compute an importance matrix from the user's calibration text, as llama-imatrix does.

The model runs over the text in chunks of ``n_ctx`` tokens. The context's eval callback
(``cb_eval``, a ``ggml_backend_sched_eval_callback``) asks to see every ``MUL_MAT`` whose
weight is a ``blk.*`` tensor; when it has run, the callback reads the input activations
(``src[1]``, f32) with ``ggml_backend_tensor_get`` and adds the sum of x² per input column
to that weight's entry. The tensor struct is read with ctypes (layout of ggml.h in the
llama.cpp that llama-cpp-python 0.3.36 vendors); names and ops come from libggml calls.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from backend.jobs.progress import Progress, ProgressCallback, no_progress
from quantize.errors import CalibrationError, ImatrixError, check_cancel
from quantize.imatrix_file import Imatrix

log = logging.getLogger(__name__)

GGML_MAX_DIMS = 4
GGML_MAX_SRC = 10
GGML_MAX_OP_PARAMS = 64
GGML_MAX_NAME = 64
GGML_TYPE_F32 = 0
MIN_CHUNK_TOKENS = 16


class GGMLTensor(ctypes.Structure):
    """``struct ggml_tensor`` from ggml.h."""

    _fields_ = [
        ("type", ctypes.c_int),
        ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * GGML_MAX_DIMS),
        ("nb", ctypes.c_size_t * GGML_MAX_DIMS),
        ("op", ctypes.c_int),
        ("op_params", ctypes.c_int32 * (GGML_MAX_OP_PARAMS // 4)),
        ("flags", ctypes.c_int32),
        ("src", ctypes.c_void_p * GGML_MAX_SRC),
        ("view_src", ctypes.c_void_p),
        ("view_offs", ctypes.c_size_t),
        ("data", ctypes.c_void_p),
        ("name", ctypes.c_char * GGML_MAX_NAME),
        ("extra", ctypes.c_void_p),
        ("padding", ctypes.c_char * 8),
    ]


def _libggml() -> Any:
    from llama_cpp._ggml import libggml

    libggml.ggml_op_desc.argtypes = [ctypes.c_void_p]
    libggml.ggml_op_desc.restype = ctypes.c_char_p
    libggml.ggml_get_name.argtypes = [ctypes.c_void_p]
    libggml.ggml_get_name.restype = ctypes.c_char_p
    libggml.ggml_nbytes.argtypes = [ctypes.c_void_p]
    libggml.ggml_nbytes.restype = ctypes.c_size_t
    libggml.ggml_is_contiguous.argtypes = [ctypes.c_void_p]
    libggml.ggml_is_contiguous.restype = ctypes.c_bool
    libggml.ggml_backend_tensor_get.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_size_t,
    ]
    libggml.ggml_backend_tensor_get.restype = None
    return libggml


class ActivationCollector:
    """The eval callback: accumulates sum of x² of the inputs of each ``blk.*`` matmul."""

    def __init__(self, imatrix: Imatrix, include_output: bool = False) -> None:
        self.imatrix = imatrix
        self.include_output = include_output
        self.ggml = _libggml()
        self.error: BaseException | None = None
        self._buf = np.empty(0, dtype=np.float32)

    def _wanted_weight(self, t: GGMLTensor) -> str | None:
        src0, src1 = t.src[0], t.src[1]
        if not src0 or not src1:
            return None
        name = (self.ggml.ggml_get_name(src0) or b"").decode("utf-8", "replace")
        if not (name.startswith("blk.") or (self.include_output and name == "output.weight")):
            return None
        s1 = GGMLTensor.from_address(src1)
        if s1.type != GGML_TYPE_F32:
            return None
        return name

    def __call__(self, tensor_p: int | None, ask: bool, user_data: int | None) -> bool:
        if not tensor_p:
            return False
        try:
            if self.ggml.ggml_op_desc(tensor_p) != b"MUL_MAT":
                return False
            t = GGMLTensor.from_address(tensor_p)
            name = self._wanted_weight(t)
            if name is None:
                return False
            if ask:
                return True
            self._collect(name, t.src[1])
        except BaseException as exc:  # never let an exception cross the C boundary
            self.error = exc
            return False
        return True

    def _collect(self, name: str, src1_p: int) -> None:
        s1 = GGMLTensor.from_address(src1_p)
        n_cols = int(s1.ne[0])
        n_rows = int(s1.ne[1] * s1.ne[2] * s1.ne[3])
        if not self.ggml.ggml_is_contiguous(src1_p):
            raise ImatrixError(f"non-contiguous activations for {name}")
        n = n_cols * n_rows
        if self._buf.size < n:
            self._buf = np.empty(n, dtype=np.float32)
        buf = self._buf[:n]
        self.ggml.ggml_backend_tensor_get(src1_p, buf.ctypes.data, 0, n * 4)
        x = buf.reshape(n_rows, n_cols).astype(np.float64)
        self.imatrix.add(name, np.einsum("ij,ij->j", x, x), n_rows)


@dataclass(frozen=True)
class ImatrixRun:
    imatrix: Imatrix
    n_tokens: int
    n_chunks: int
    seconds: float


def _tokenize(vocab: Any, text: str) -> list[int]:
    from backend.llama.errors import TokenizeError
    from backend.llama.tokens import tokenize

    try:
        tokens = tokenize(vocab, text.encode("utf-8"), add_special=False, parse_special=False)
    except TokenizeError as exc:
        raise CalibrationError("tokenising the calibration text failed") from exc
    return tokens.tolist()  # type: ignore[no-any-return]


def _log_llama_line(line: str) -> None:
    log.debug("llama.cpp: %s", line)


def compute_imatrix(
    model_path: str | Path,
    calibration_text: str,
    *,
    n_ctx: int = 256,
    max_chunks: int | None = None,
    threads: int | None = None,
    dataset: str = "",
    progress: ProgressCallback = no_progress,
    cancel: threading.Event | None = None,
) -> ImatrixRun:
    """Run the GGUF model over ``calibration_text`` and return its importance matrix."""

    model_path = Path(model_path)
    if not model_path.is_file():
        raise ImatrixError(f"model file not found: {model_path}")
    if not calibration_text.strip():
        raise CalibrationError("the calibration text is empty")
    from backend.llama.log_hook import captured_llama_log  # loads llama.cpp: only when used

    with captured_llama_log(_log_llama_line):
        return _compute(
            model_path, calibration_text, n_ctx, max_chunks, threads, dataset, progress, cancel
        )


def _compute(
    model_path: Path,
    calibration_text: str,
    n_ctx: int,
    max_chunks: int | None,
    threads: int | None,
    dataset: str,
    progress: ProgressCallback,
    cancel: threading.Event | None,
) -> ImatrixRun:
    import llama_cpp

    from backend.llama.backend_init import init_llama_backend
    from backend.llama.model_params import model_params

    init_llama_backend()
    mparams = model_params()  # QUANTDESK_NO_REPACK, else the CPU probe's verdict
    model = llama_cpp.llama_model_load_from_file(str(model_path).encode("utf-8"), mparams)
    if not model:
        raise ImatrixError(f"llama.cpp could not load {model_path}")
    ctx = None
    started = time.monotonic()
    imatrix = Imatrix(dataset=dataset)
    collector = ActivationCollector(imatrix)
    callback = llama_cpp.ggml_backend_sched_eval_callback(collector)
    try:
        vocab = llama_cpp.llama_model_get_vocab(model)
        tokens = _tokenize(vocab, calibration_text)
        add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
        body = n_ctx - 1 if add_bos else n_ctx
        chunks = [tokens[i : i + body] for i in range(0, len(tokens), body)]
        chunks = [c for c in chunks if len(c) >= MIN_CHUNK_TOKENS]
        if max_chunks is not None:
            chunks = chunks[:max_chunks]
        if not chunks:
            raise CalibrationError(
                f"the calibration text is too short: {len(tokens)} tokens "
                f"(need at least {MIN_CHUNK_TOKENS})"
            )
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = n_ctx
        cparams.n_ubatch = n_ctx
        cparams.n_seq_max = 1
        if threads:
            cparams.n_threads = threads
            cparams.n_threads_batch = threads
        cparams.cb_eval = callback
        cparams.cb_eval_user_data = None
        ctx = llama_cpp.llama_init_from_model(model, cparams)
        if not ctx:
            raise ImatrixError("llama.cpp could not create a context for the imatrix run")
        memory = llama_cpp.llama_get_memory(ctx)
        bos = llama_cpp.llama_vocab_bos(vocab)
        n_tokens = 0
        progress(Progress("imatrix", 0, len(chunks), f"{len(tokens)} calibration tokens"))
        for i, chunk in enumerate(chunks):
            check_cancel(cancel, "imatrix computation")
            ids = ([bos] if add_bos else []) + chunk
            arr = (llama_cpp.llama_token * len(ids))(*ids)
            llama_cpp.llama_memory_clear(memory, True)
            rc = llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(arr, len(ids)))
            if collector.error is not None:
                raise ImatrixError(f"collecting activations failed: {collector.error}")
            if rc != 0:
                raise ImatrixError(f"llama_decode failed with code {rc}")
            n_tokens += len(ids)
            imatrix.n_chunks = i + 1
            progress(Progress("imatrix", i + 1, len(chunks), f"chunk {i + 1}/{len(chunks)}"))
    finally:
        if ctx:
            llama_cpp.llama_free(ctx)
        llama_cpp.llama_model_free(model)
    if not imatrix.entries:
        raise ImatrixError("no matmul activations were collected; is this a supported model?")
    seconds = time.monotonic() - started
    log.info(
        "imatrix: %d weights from %d tokens in %d chunks, %.1f s",
        len(imatrix.entries),
        n_tokens,
        imatrix.n_chunks,
        seconds,
    )
    return ImatrixRun(imatrix, n_tokens, imatrix.n_chunks, seconds)


def read_calibration(path: str | Path) -> str:
    path = Path(path)
    if not path.is_file():
        raise CalibrationError(f"calibration file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CalibrationError(f"cannot read calibration file {path}: {exc}") from exc
    if not text.strip():
        raise CalibrationError(f"calibration file {path} is empty")
    return text
