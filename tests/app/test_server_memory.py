"""The whole server's memory: the RSS of a real process and the processes under it (a
library server's router and its model servers), and nothing once the process is gone."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from app.page_models.server_memory_view import ServerMemory, ram_series_name, ram_tooltip
from app.workers.server_memory import server_memory

# a parent that starts one child holding 64 MiB, as a router starts a model server
PARENT = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', "
    "'import time; b = bytearray(64 << 20); time.sleep(120)'])\n"
    "time.sleep(120)\n"
)


def test_a_process_and_its_children_are_added_up() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT])
    try:
        proc = psutil.Process(parent.pid)
        deadline = time.monotonic() + 60
        memory = server_memory(parent.pid)
        while time.monotonic() < deadline and (
            memory is None or memory.children < 1 or memory.total - memory.main < 64 << 20
        ):
            time.sleep(0.1)
            memory = server_memory(parent.pid)
        assert memory is not None and memory.children == 1
        child = proc.children()[0]
        assert memory.main > 0
        assert memory.total - memory.main >= 64 << 20  # the child's bytearray is counted
        assert abs(memory.main - proc.memory_info().rss) < 16 << 20
        assert abs(memory.total - memory.main - child.memory_info().rss) < 16 << 20
    finally:
        for p in psutil.Process(parent.pid).children(recursive=True):
            p.kill()
        parent.kill()
        parent.wait()
    assert server_memory(parent.pid) is None


def test_what_the_ram_chart_calls_the_server_line() -> None:
    memory = ServerMemory(total=700 << 20, main=150 << 20, children=2)
    assert ram_series_name(None, memory) == "router + 2 models"
    assert ram_series_name(None, None) == "server RSS"
    assert ram_series_name("org/beta", memory) == "model RSS"
    assert ram_tooltip(None, memory, 0).startswith(
        "The whole server: 700.0 MiB resident: the router 150.0 MiB and 2 model servers 550.0 MiB."
    )
    assert ram_tooltip("beta", None, 200 << 20, 330 << 20) == (
        "beta: 200.0 MiB resident (its own server process); the server admitted it with an "
        "estimate of 330.0 MiB."
    )
