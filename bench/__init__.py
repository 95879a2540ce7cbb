"""Benchmarks run by ``make bench`` (see ``bench.run``); results go to docs/benchmarks.md.

Every benchmark process, and every child it starts, runs with bytecode caching on, as an
installed package does (pip compiles it): a shell with ``PYTHONDONTWRITEBYTECODE`` set (this
build machine's) would otherwise make each fresh process compile every module it imports,
about 0.1-0.2 s and 25 MB more for ours, and far less for deltalake, whose code is mostly Rust.
"""

import os
import sys

sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
