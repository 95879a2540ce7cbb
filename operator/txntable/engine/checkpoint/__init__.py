"""Checkpoints (build, write), expired-log clean-up, the retention properties behind them,
and the post-commit hook that runs them.

Importing this package loads nothing.
"""
