"""Driver programs that Spark (or a local process) runs: ``python -m txntable.jobs.<name>``.

Each parses its arguments, runs one piece of maintenance, and prints one JSON result line.
"""
