"""The GPU check kit's run (``benchmarks/gpu/run.sh OUT_DIR [--dry-run]`` calls this).

Steps, in order: env, deps, build (in the background), synth (while it builds), build-wait,
imports, quantize, fit, peer, oversize, kld. Each is timed; a failure is recorded and the kit
goes on; a step whose inputs failed is skipped, and so is every step once the time budget
left is below what it needs (each with the reason). Writes OUT_DIR/gpu_kit.json,
OUT_DIR/summary.txt and OUT_DIR/logs.txt (the tail of each step's log).

Stdlib only: it runs before the carried wheels are installed. Steps that need quantdesk run
as child processes with ``KitPaths.quantdesk_env()``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.gpu import kit_deps, kit_summary, llama_build
from benchmarks.gpu.kit_env import RESULT_PREFIX, KitPaths, default_paths
from benchmarks.gpu.kit_plan import DRY_RUN, GPU, Plan


@dataclass
class StepRecord:
    name: str
    status: str = "pending"  # passed | failed | skipped
    seconds: float = 0.0
    reason: str | None = None
    result: dict[str, Any] = field(default_factory=dict)


class Kit:
    def __init__(self, paths: KitPaths, plan: Plan) -> None:
        self.paths = paths
        self.plan = plan
        self.t0 = time.monotonic()
        self.records: list[StepRecord] = []
        self.build_proc: subprocess.Popen[bytes] | None = None
        self.build_started = 0.0

    # --- time --------------------------------------------------------------------------------
    def left(self) -> float:
        return self.plan.budget_s - (time.monotonic() - self.t0)

    def status(self, name: str) -> str | None:
        return next((r.status for r in self.records if r.name == name), None)

    # --- running steps -------------------------------------------------------------------------
    def step(
        self,
        name: str,
        body: Callable[[float], dict[str, Any]],
        needs: tuple[str, ...] = (),
        min_s: float | None = None,
    ) -> StepRecord:
        rec = StepRecord(name)
        self.records.append(rec)
        missing = [n for n in needs if self.status(n) != "passed"]
        need = self.plan.min_s.get(name, 5) if min_s is None else min_s
        if missing:
            rec.status, rec.reason = "skipped", f"needs {', '.join(missing)}, which did not pass"
        elif self.left() < need:
            rec.status = "skipped"
            rec.reason = f"time budget: {self.left():.0f} s left, the step needs ~{need:.0f} s"
        if rec.status == "skipped":
            self.log(f"[{name}] skipped: {rec.reason}")
            return rec
        self.log(f"[{name}] start ({self.left():.0f} s of the budget left)")
        t = time.monotonic()
        try:
            rec.result = body(max(self.left() - 5, 5))
            rec.status = "passed" if rec.result.get("ok") else "failed"
            if rec.status == "failed":
                rec.reason = str(rec.result.get("error") or "checks failed (see result)")
        except subprocess.TimeoutExpired as exc:
            rec.status, rec.reason = "failed", f"timed out after {exc.timeout:.0f} s"
        except Exception as exc:
            rec.status, rec.reason = "failed", f"{type(exc).__name__}: {exc}"
        rec.seconds = round(time.monotonic() - t, 1)
        self.log(
            f"[{name}] {rec.status} in {rec.seconds} s" + (f": {rec.reason}" if rec.reason else "")
        )
        self.write()  # a kit stopped from outside still leaves what it measured
        return rec

    def child(
        self, name: str, module: str, args: list[str], timeout: float, quantdesk: bool = True
    ) -> dict[str, Any]:
        """Run ``python -m benchmarks.gpu.<module>``; its last KIT-RESULT line is the answer."""
        log = self.paths.logs / f"{name}.log"
        env = self.paths.quantdesk_env() if quantdesk else self.paths.plain_env()
        cmd = [str(self.paths.python), "-m", f"benchmarks.gpu.{module}", *args]
        with log.open("wb") as fh:
            fh.write((" ".join(cmd) + "\n").encode())
            fh.flush()
            proc = subprocess.run(
                cmd,
                stdout=subprocess.PIPE,
                stderr=fh,
                env=env,
                cwd=self.paths.root,
                timeout=timeout,
            )
        out = proc.stdout.decode(errors="replace")
        with log.open("a", encoding="utf-8") as fh:
            fh.write(out)
        lines = [ln for ln in out.splitlines() if ln.startswith(RESULT_PREFIX)]
        if not lines:
            return {"ok": False, "error": f"no result (exit {proc.returncode}); see {log.name}"}
        result: dict[str, Any] = json.loads(lines[-1][len(RESULT_PREFIX) :])
        return result

    @staticmethod
    def log(message: str) -> None:
        stamp = datetime.now(UTC).strftime("%H:%M:%S")
        sys.stdout.write(f"{stamp} gpu-kit {message}\n")
        sys.stdout.flush()

    # --- the steps ------------------------------------------------------------------------------
    def env_step(self, _timeout: float) -> dict[str, Any]:
        def run(cmd: list[str]) -> str | None:
            if shutil.which(cmd[0]) is None:
                return None
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            return (res.stdout or res.stderr).strip()[-600:]

        manifest = self.paths.carry / "manifest.json"
        return {
            "ok": (self.paths.llama_src / "CMakeLists.txt").is_file(),
            "mode": "dry-run" if self.paths.dry_run else "gpu",
            "python": sys.version.split()[0],
            "kit_python": str(self.paths.python),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "nvidia_smi": run(
                [
                    "nvidia-smi",
                    "--query-gpu=name,memory.total,driver_version",
                    "--format=csv,noheader",
                ]
            ),
            "nvcc": (run(["nvcc", "--version"]) or "").splitlines()[-1:] or None,
            "cmake": (run(["cmake", "--version"]) or "").splitlines()[:1],
            "carry_manifest": json.loads(manifest.read_text()) if manifest.is_file() else None,
            "error": None
            if (self.paths.llama_src / "CMakeLists.txt").is_file()
            else "carried llama.cpp source missing: run benchmarks/gpu/prepare.sh",
        }

    def deps_step(self, timeout: float) -> dict[str, Any]:
        return kit_deps.install_and_check(self.paths, timeout)

    def build_start(self, _timeout: float) -> dict[str, Any]:
        build = self.paths.build
        cuda = self.plan.cuda
        before = llama_build.configured_for(build)
        if before is not None and before != ("cuda" if cuda else "cpu"):
            shutil.rmtree(build)  # a build dir of the other kind
        configure = llama_build.configure_command(self.paths.llama_src, build, cuda=cuda)
        compile_ = llama_build.build_command(build, self.plan.build_jobs)
        script = f"{_shell(configure)} && {_shell(compile_)}"
        log = self.paths.logs / "build.log"
        self.build_started = time.monotonic()
        self.build_proc = subprocess.Popen(
            ["bash", "-c", script],
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            cwd=self.paths.root,
        )
        return {
            "ok": True,
            "configure": configure[5:],
            "targets": list(llama_build.TARGETS),
            "jobs": self.plan.build_jobs,
            "reused_build_dir": before is not None,
        }

    def build_wait(self, timeout: float) -> dict[str, Any]:
        assert self.build_proc is not None
        try:
            rc = self.build_proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.build_proc.kill()
            raise
        seconds = round(time.monotonic() - self.build_started, 1)
        missing = llama_build.missing_outputs(self.paths.build)
        cuda_ok = llama_build.cuda_lib_built(self.paths.build) if self.plan.cuda else None
        tail = (self.paths.logs / "build.log").read_text(errors="replace").splitlines()[-5:]
        ok = rc == 0 and not missing and cuda_ok is not False
        if ok:
            link_package_libs(self.paths)
        return {
            "ok": ok,
            "exit_code": rc,
            "build_seconds": seconds,
            "missing": missing,
            "libggml_cuda": cuda_ok,
            "log_tail": tail,
            "package_lib_linked_to_build": ok,
            "error": None if ok else f"build exit {rc}, missing {missing}",
        }

    def quantize_step(self, timeout: float) -> dict[str, Any]:
        models = self.paths.models
        out = models / "quantize-out"
        shutil.rmtree(out, ignore_errors=True)
        cmd = self.paths.quantdesk(
            "quantize",
            str(self.paths.model("F16")),
            "--type",
            "Q4_K_M",
            "--type",
            "Q8_0",
            "--out",
            str(out),
            "--threads",
            str(self.plan.quant_threads),
        )
        log = self.paths.logs / "quantize.log"
        t = time.monotonic()
        with log.open("wb") as fh:
            rc = subprocess.run(
                cmd,
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=self.paths.quantdesk_env(),
                cwd=self.paths.root,
                timeout=timeout,
            ).returncode
        sizes: dict[str, int] = {}
        for quant in ("Q4_K_M", "Q8_0"):
            found = sorted(out.glob(f"*{quant}*.gguf"))
            if found:
                os.replace(found[0], self.paths.model(quant))
                sizes[quant] = self.paths.model(quant).stat().st_size
        ok = rc == 0 and len(sizes) == 2
        return {
            "ok": ok,
            "exit_code": rc,
            "seconds": round(time.monotonic() - t, 1),
            "sizes": sizes,
            "error": None if ok else f"quantize exit {rc}; see quantize.log",
        }

    def run_all(self) -> None:
        p, plan = self.paths, self.plan
        for folder in (p.work, p.logs, p.models, p.out):
            folder.mkdir(parents=True, exist_ok=True)
        threads = str(plan.serve_threads)
        self.step("env", self.env_step, min_s=0)
        self.step("deps", self.deps_step, needs=("env",))
        self.step("build", self.build_start, needs=("env",), min_s=0)
        self.step(
            "synth",
            lambda t: self.child(
                "synth", "step_synth", ["--size", plan.synth_size], t, quantdesk=False
            ),
            needs=("env",),
        )
        self.step("build-wait", self.build_wait, needs=("build",), min_s=0)
        self.step(
            "imports",
            lambda t: self.child("imports", "step_imports", [], t),
            needs=("deps", "build-wait"),
        )
        self.step("quantize", self.quantize_step, needs=("imports", "synth"))
        self.step(
            "fit",
            lambda t: self.child(
                "fit",
                "step_fit",
                [
                    "--model",
                    "synth-Q4_K_M.gguf",
                    "--n-layer",
                    str(plan.n_layer),
                    "--ctx",
                    str(plan.fit_ctx),
                    "--parallel",
                    str(plan.fit_parallel),
                    "--threads",
                    threads,
                ],
                t,
            ),
            needs=("quantize",),
        )
        peer_args = [
            "--model",
            "synth-Q4_K_M.gguf",
            "--levels",
            plan.peer_levels,
            "--parallel",
            str(plan.peer_parallel),
            "--ctx",
            str(plan.peer_ctx),
            "--threads",
            threads,
            "--prompt-tokens",
            str(plan.peer_prompt_tokens),
            "--max-tokens",
            str(plan.peer_max_tokens),
            "--passes",
            str(plan.peer_passes),
        ]
        self.step(
            "peer",
            lambda t: self.child(
                "peer", "step_peer", peer_args + ([] if p.dry_run else ["--gpu"]), t
            ),
            needs=("quantize",),
        )
        self.step(
            "oversize",
            lambda t: self.child(
                "oversize",
                "step_oversize",
                ["--model", "synth-Q4_K_M.gguf", "--threads", threads],
                t,
            ),
            needs=("quantize",),
        )
        self.step(
            "kld",
            lambda t: self.child(
                "kld",
                "step_kld",
                [
                    "--chunks",
                    str(plan.kld_chunks),
                    "--ctx",
                    str(plan.kld_ctx),
                    "--threads",
                    str(plan.quant_threads),
                ],
                t,
            ),
            needs=("quantize",),
        )
        self.step(
            "router",
            lambda t: self.child(
                "router",
                "step_router",
                [
                    "--model",
                    "synth-Q4_K_M.gguf",
                    "--ctx",
                    str(plan.fit_ctx),
                    "--parallel",
                    str(plan.fit_parallel),
                    "--threads",
                    threads,
                ],
                t,
            ),
            needs=("quantize",),
        )
        spec_args = ["--model", "synth-Q4_K_M.gguf", "--threads", threads]
        self.step(
            "spec",
            lambda t: self.child(
                "spec", "step_spec", spec_args + ([] if p.dry_run else ["--gpu"]), t
            ),
            needs=("quantize",),
        )
        vision_args = ["--threads", threads, "--vision", plan.vision]
        self.step(
            "vision",
            lambda t: self.child(
                "vision", "step_vision", vision_args + ([] if p.dry_run else ["--gpu"]), t
            ),
            needs=("imports",),
        )
        if self.build_proc is not None and self.build_proc.poll() is None:
            self.build_proc.kill()

    def write(self) -> Path:
        data = {
            "kit": "benchmarks/gpu (issue 21)",
            "mode": "dry-run" if self.paths.dry_run else "gpu",
            "finished_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "wall_s": round(time.monotonic() - self.t0, 1),
            "budget_s": self.plan.budget_s,
            "plan": self.plan.__dict__,
            "steps": [r.__dict__ for r in self.records],
        }
        out = self.paths.out
        (out / "gpu_kit.json").write_text(
            json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8"
        )
        (out / "summary.txt").write_text(kit_summary.summary(data), encoding="utf-8")
        (out / "logs.txt").write_text(kit_summary.log_tails(self.paths.logs), encoding="utf-8")
        return out


def link_package_libs(paths: KitPaths) -> None:
    """``llama_cpp/lib`` of the carried package -> the build's libraries. The engine loads
    ``libllama`` through ``LLAMA_CPP_LIB_PATH``, but code that opens ``libggml`` from the
    package's own ``lib`` folder (backend/llama/rpc_ggml.py) must find the same file."""
    lib = paths.carry / "pypkg" / "llama_cpp" / "lib"
    if lib.is_symlink() or lib.is_file():
        lib.unlink()
    elif lib.is_dir():
        shutil.rmtree(lib)
    lib.symlink_to(paths.lib_dir.resolve(), target_is_directory=True)


def _shell(cmd: list[str]) -> str:
    import shlex

    return shlex.join(cmd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "out", type=Path, help="output folder (gpu_kit.json, summary.txt, logs.txt)"
    )
    parser.add_argument("--dry-run", action="store_true", help="CPU build, tiny model, small loads")
    parser.add_argument("--budget", type=float, default=None, help="seconds for the whole kit")
    args = parser.parse_args(argv)
    plan = DRY_RUN if args.dry_run else GPU
    if args.budget:
        plan = Plan(**{**plan.__dict__, "budget_s": args.budget})
    kit = Kit(default_paths(args.out.resolve(), args.dry_run), plan)

    def stop(signum: int, _frame: Any) -> None:
        raise SystemExit(f"stopped by signal {signum}")

    signal.signal(signal.SIGTERM, stop)
    try:
        kit.run_all()
    finally:
        out = kit.write()
    sys.stdout.write((out / "summary.txt").read_text())
    return 0 if all(r.status == "passed" for r in kit.records) else 1


if __name__ == "__main__":
    sys.exit(main())
