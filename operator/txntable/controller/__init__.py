"""The tick: one reconcile of one table, and what it keeps per table between ticks.

``tick.Operator.reconcile`` reads as its steps, each in the module of its concern:

* ``runs`` (``RunTracker.see``): the log observed (``observe``), the table's runs listed and each
  finished run adopted once (``run_records``); the back-off after failed runs;
* ``foresee``: the next compaction run's plan, our runs' conflicts with other writers, and what
  sizes the run (``launch.sizing.size`` with what ``RunSizer`` remembers);
* ``act``: compaction, VACUUM and checkpoint decided (``reconcile.decide``), held (``holds``) or
  started through the one launch path (``launching``, with the run requests of ``requests``);
* the report: the next status (``reconcile.status``) and the Events to post.

``memory`` keeps one record per table (and per policy) for all of them. Nothing here imports
Kopf: the Kopf handlers, the local mode and the tests drive the same tick through
``handlers.driver`` (docs/architecture.md, "The controller").
"""
