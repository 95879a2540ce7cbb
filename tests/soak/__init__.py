"""Seeded, bounded torture runs of the engine and the maintenance commands (``make soak``).

Concurrent writers of both engines append while OPTIMIZE, checkpoints and log cleanup run as
separate processes that are SIGKILLed at random moments; the log is aged (modification times set
back) and skewed (a writer's clock and a commit's time ahead). After every step the invariants
that matter to users are checked, with deltalake as the independent reader: versions contiguous,
no commit overwritten, every acknowledged commit present, nothing resurrected, every version
inside the retention loadable by both engines. See docs/reliability.md.
"""
