"""The ``txntable`` command line: inspect tables, run maintenance by hand, run the local loop."""
