"""Table maintenance: pure OPTIMIZE planning, Z-order keys, and the executors that run a plan.

Planning (``planner``, ``zorder``) is pure; the Spark executor is imported only by the code that
asks for it, so the controller can plan without a JVM. The package itself imports nothing:
``txntable vacuum`` needs only ``maintenance.errors`` (and ``vacuum_spark`` with Spark), and
importing the planner with it cost that command about 0.1 s and pyarrow's compute functions
before it had read anything. Import what you use from its module (``maintenance.planner``).
"""
