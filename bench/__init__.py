"""Benchmarks run by ``make bench`` (see ``bench.run``); results go to docs/benchmarks.md."""
