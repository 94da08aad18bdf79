"""Every job's cancelled error is a JobCancelledError and so ends the process with 130."""

from __future__ import annotations

import pytest

from backend.bench.errors import BenchCancelled, BenchError
from backend.compare.errors import CompareCancelledError, CompareError
from backend.core.errors import QuantDeskError
from backend.entrypoints.main import main
from backend.hub.errors import DownloadCancelledError, DownloadError
from backend.jobs.errors import CANCELLED_EXIT_CODE, JobCancelledError
from quantize.errors import QuantizeCancelledError, QuantizeError


@pytest.mark.parametrize(
    ("cancelled", "package_root"),
    [
        (DownloadCancelledError, DownloadError),
        (BenchCancelled, BenchError),
        (CompareCancelledError, CompareError),
        (QuantizeCancelledError, QuantizeError),
    ],
)
def test_cancelled_errors_share_the_job_root_and_exit_code(
    cancelled: type[QuantDeskError], package_root: type[QuantDeskError]
) -> None:
    error = cancelled("cancelled")
    assert isinstance(error, JobCancelledError) and isinstance(error, package_root)
    assert error.exit_code == CANCELLED_EXIT_CODE == 130


def test_ctrl_c_in_the_cli_exits_with_the_cancelled_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted() -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr("backend.entrypoints.main._run_gui", interrupted)
    assert main([]) == CANCELLED_EXIT_CODE
    assert "interrupted" in capsys.readouterr().err
