"""The demo's writer processes leave Ctrl-C to the demo (issue 23, items 12 and 13).

A terminal's Ctrl-C goes to the whole foreground process group: a writer still importing when it
came printed its own ``KeyboardInterrupt`` traceback above the demo's ``error: interrupted``.
The writers are started with SIGINT blocked, a mask a spawned process keeps; the demo stops them.
"""

from __future__ import annotations

import multiprocessing
import signal
from typing import Any

from txntable.cli.demo_cmd import start_deaf_to_ctrl_c


def _report_mask(out: Any) -> None:
    out.put(sorted(signal.pthread_sigmask(signal.SIG_BLOCK, set())))


def test_writers_start_with_ctrl_c_blocked_and_the_demo_keeps_it() -> None:
    ctx = multiprocessing.get_context("spawn")  # as demo_cmd.fragment starts its writers
    queue = ctx.Queue()
    proc = ctx.Process(target=_report_mask, args=(queue,))
    start_deaf_to_ctrl_c([proc])
    mask = queue.get(timeout=120)
    proc.join(timeout=120)
    assert signal.SIGINT in mask  # blocked from the child's first instruction
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())  # not ours
