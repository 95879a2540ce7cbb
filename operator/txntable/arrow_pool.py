"""Which Arrow allocator a process gets, chosen by the kind of process, before pyarrow loads.

pyarrow picks its default memory pool from ``ARROW_DEFAULT_MEMORY_POOL`` once, when it is first
imported; ``pa.set_memory_pool`` later moves only the allocations made from Python, and made
peaks higher (docs/benchmarks.md, checkpoint). So the choice belongs to the process's entry
point, and the two kinds of process want different pools. Measured on the read-path benchmark's
100,000-file table, whole process, three rounds each, 2026-12-03 (docs/benchmarks.md, "The
Arrow allocator"):

* a one-shot command or job (``txntable checkpoint``, ``inspect``, a run's driver and tasks)
  loads, writes and exits: glibc's allocator (``system``) peaked 18-26% lower (checkpoint 230
  MB against 313 MB in about the same 0.65 s; ``inspect --json``, before it streamed its
  document, 403 MB against 500 MB, 0.12 s slower), because mimalloc keeps the freed pages of a
  load mapped;
* the controller keeps a summary of every table for its lifetime and replaces them tick after
  tick: there mimalloc, pyarrow's default, reuses what it keeps and ended 18% lower (1,000
  summaries, 50 of the big table: 296 MB against 361 MB); with small tables the two were equal
  (the real controller at 1,000 tables: 363 and 364 MB).

Both images set ``system`` (Dockerfile); this module makes the CLI's one-shot commands and the
runs the local launcher starts behave as the run pods do (``txntable run --local`` and
``demo``, which run the controller's loop, keep the default). The controller (``python -m
txntable``) is left to its environment: outside the image, pyarrow's default. A value the
user set always wins. Standard library only, outside the layers.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

#: the variable pyarrow reads when it is first imported
VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"
#: the pool of one-shot commands and jobs
ONE_SHOT_POOL = "system"


def for_one_shot() -> None:
    """Give this process, and what it starts, the one-shot pool unless a pool was chosen
    already. A process that has loaded pyarrow already (a test calling the CLI in process) is
    left alone: the choice could no longer take effect in it."""
    if "pyarrow" not in sys.modules:
        os.environ.setdefault(VARIABLE, ONE_SHOT_POOL)


def one_shot_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` for a one-shot job about to start: the one-shot pool unless it names one."""
    return {VARIABLE: ONE_SHOT_POOL, **environ}


__all__ = ["ONE_SHOT_POOL", "VARIABLE", "for_one_shot", "one_shot_environment"]
