"""The controller process around the tick: Kopf glue (the ``kopf_*`` modules) over two Kopf-free
drivers, ``driver``, which ticks a table (``controller.tick``), and ``policy_driver``, which
judges a policy; both hand statuses to the one writer (``status_writer``). Beside them: the
commit-event sources that wake a table, shards across replicas, Secrets, liveness and the tick
pool.

Only the ``kopf_*`` modules import Kopf (and ``logs``, which tames Kopf's own logging); the
drivers and everything under them are shared with the local mode of the CLI
(docs/architecture.md, "The controller").
"""
