"""A full disk (or a size limit, or a failing disk) while writing an output: one line that
names the file and the free space, instead of ``basic_ios::clear: iostream error``
(issue 14.10)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from quantize.errors import OutputWriteError
from quantize.output_files import write_error
from quantize.quantizer import quantize_gguf

FREE = r"\(free: (\d+ B|\d+\.\d (KiB|MiB|GiB|TiB))\)"
OUTPUT = "SmolLM2-135M-Instruct-Q8_0.gguf"

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux devices")


def _real_enospc() -> OSError:
    try:
        with open("/dev/full", "wb") as fh:  # every write fails with ENOSPC
            fh.write(b"x")
            fh.flush()
    except OSError as exc:
        return exc
    raise AssertionError("/dev/full accepted a write")


@linux_only
def test_write_failures_become_one_line_with_path_and_free_space(tmp_path: Path) -> None:
    exc = _real_enospc()
    assert exc.errno == errno.ENOSPC
    part = tmp_path / "model-Q4_K_M.gguf.part"
    error = write_error(part, exc.errno)
    assert isinstance(error, OutputWriteError)
    assert re.fullmatch(rf"no space left writing {re.escape(str(part))} {FREE}", str(error))
    for code, reason in [
        (errno.EFBIG, "file too large"),
        (errno.EIO, "I/O error"),
        (errno.EDQUOT, "disk quota exceeded"),
    ]:
        message = str(write_error(part, code))
        assert message.startswith(f"{reason} ") and str(part) in message and "(free: " in message
    assert write_error(part, errno.EACCES) is None  # not a failure of the disk: said elsewhere
    assert write_error(part, None) is None


def _cli_quantize(source: Path, out: Path, **popen: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [
            sys.executable,
            "-m",
            "backend.entrypoints.main",
            "quantize",
            str(source),
            "--type",
            "Q8_0",
            "--allow-requantize",
            "--out",
            str(out),
            "--threads",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        **popen,
    )


@linux_only
def test_quantising_onto_a_device_that_is_full(smollm2_path: Path, tmp_path: Path) -> None:
    """llama.cpp writes its output through a C++ stream: the errno must survive that."""
    part = tmp_path / f"{OUTPUT}.part"
    part.symlink_to("/dev/full")
    with pytest.raises(OutputWriteError) as caught:
        quantize_gguf(smollm2_path, "Q8_0", tmp_path, allow_requantize=True, threads=2)
    assert re.fullmatch(rf"no space left writing {re.escape(str(part))} {FREE}", str(caught.value))
    assert not (tmp_path / OUTPUT).exists() and not part.exists()


@contextlib.contextmanager
def _tiny_tmpfs(where: Path, size: str) -> Iterator[Path]:
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)


@linux_only
def test_a_full_disk_during_quantisation_is_one_line(smollm2_path: Path, tmp_path: Path) -> None:
    with _tiny_tmpfs(tmp_path / "small", "3m") as small:
        proc = _cli_quantize(smollm2_path, small)
        assert proc.returncode != 0
        part = small / f"{OUTPUT}.part"
        assert re.fullmatch(
            rf"quantdesk: error: no space left writing {re.escape(str(part))} {FREE}",
            proc.stderr.splitlines()[-1],
        ), proc.stderr
        assert "iostream" not in proc.stderr and "Traceback" not in proc.stderr
        assert os.listdir(small) == []  # the partial output went, the space is back


@linux_only
def test_a_file_size_limit_during_quantisation_is_one_line(
    smollm2_path: Path, tmp_path: Path
) -> None:
    """EFBIG: the output outgrows the largest file this process may write."""

    def limit_file_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4 << 20, 4 << 20))

    proc = _cli_quantize(smollm2_path, tmp_path, preexec_fn=limit_file_size)
    assert proc.returncode != 0
    part = tmp_path / f"{OUTPUT}.part"
    assert re.fullmatch(
        rf"quantdesk: error: file too large writing {re.escape(str(part))} {FREE}",
        proc.stderr.splitlines()[-1],
    ), proc.stderr
    assert "iostream" not in proc.stderr and "Traceback" not in proc.stderr
    assert not part.exists() and not (tmp_path / OUTPUT).exists()
