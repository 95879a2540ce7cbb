"""The controller-wide limit on runs in flight (``TXNTABLE_MAX_CONCURRENT_RUNS``, "across all
tables") holds across ticks of several tables, whoever drives them.

Three ways it used to leak, each a test here:

* a Spark checkpoint launched in a tick was not counted in the tick's ``active_runs``, so the
  other tables' ticks did not see it until the table ticked again;
* a table's own runs in flight were not added to the other tables' (the larger of the two was
  taken), so a table with a run in flight could start one more past the limit;
* local mode (``txntable run --local``) passed no count of the other tables' runs, so each
  table had the whole limit to itself.

Every caller now ticks through ``handlers.driver``, which passes no count: the operator counts
the other tables' runs itself (``RunsInFlight``), so the tables here are ticked that way. The
tables are real; the launcher is the in-memory one of tests.support.controller, listing each
table's runs by its label.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.support.controller import T0, MemoryLauncher, checkpointing, compaction, fragmented
from tests.support.manifests import table_manifest
from txntable.api.conditions import Reason
from txntable.api.constants import LABEL_TABLE
from txntable.api.types import CheckpointPolicy, CompactionPolicy, TxnTable
from txntable.config import Config
from txntable.controller.tick import Operator, Tick
from txntable.launch import RunStatus


class TableLauncher(MemoryLauncher):
    """The in-memory launcher, listing only the asked table's runs (as the real ones do)."""

    def list_runs(self, namespace: str, table: str) -> list[RunStatus]:
        return [r for r in super().list_runs(namespace, table) if r.labels[LABEL_TABLE] == table]

    def in_flight(self) -> list[str]:
        return [name for name, run in self.runs.items() if not run.state.finished]


def txntable(name: str, location: Path) -> TxnTable:
    return TxnTable.from_manifest(
        table_manifest(
            name,
            location,
            metadata={"uid": f"uid-{name}"},
            compactionPolicyRef={"name": "compact"},
            checkpointPolicyRef={"name": "ckpt"},
        )
    )


class Driver:
    """One ``Operator`` for several tables, ticked in turn as ``handlers.driver`` ticks them;
    statuses written back after each tick."""

    def __init__(self, tmp_path: Path, names: list[str], *, limit: int) -> None:
        self.clock = [T0]
        self.launcher = TableLauncher(self.clock)
        self.operator = Operator(
            config=Config(default_backend="local", max_concurrent_runs=limit),
            launchers=lambda backend: self.launcher,
            clock=lambda: self.clock[0],
        )
        self.tables: dict[str, TxnTable] = {}
        for name in names:
            fragmented(tmp_path / name)  # 6 commits, 12 small files: compaction due
            self.tables[name] = txntable(name, tmp_path / name)

    def tick(self, name: str, comp: CompactionPolicy | None, ckpt: CheckpointPolicy | None) -> Tick:
        table = self.tables[name]
        tick = self.operator.reconcile(table, [comp] if comp else [], [ckpt] if ckpt else [])
        self.tables[name] = replace(table, status=tick.status)
        return tick


NOT_DUE_COMPACTION = compaction(triggers={"smallFiles": 1000})
NOT_DUE_CHECKPOINT = checkpointing(commitInterval=1000, mode="Spark")
DUE_CHECKPOINT = checkpointing(commitInterval=5, mode="Spark")


def reason_of(tick: Tick, condition: str) -> str:
    return next(str(c.reason) for c in tick.status.conditions if c.type == condition)


def test_a_launched_spark_checkpoint_is_a_run_in_flight(tmp_path: Path) -> None:
    d = Driver(tmp_path, ["events"], limit=4)
    tick = d.tick("events", NOT_DUE_COMPACTION, DUE_CHECKPOINT)
    (name,) = d.launcher.in_flight()
    assert tick.launched == (name,)
    assert tick.active_runs == 1


def test_a_spark_checkpoint_in_flight_takes_the_last_slot(tmp_path: Path) -> None:
    d = Driver(tmp_path, ["events", "orders"], limit=1)
    d.tick("events", NOT_DUE_COMPACTION, DUE_CHECKPOINT)
    assert len(d.launcher.in_flight()) == 1
    tick = d.tick("orders", compaction(), NOT_DUE_CHECKPOINT)  # its compaction is due
    assert len(d.launcher.in_flight()) == 1, d.launcher.in_flight()
    assert reason_of(tick, "Compacting") == Reason.CONCURRENCY_LIMIT


def test_a_tables_own_runs_count_with_the_others(tmp_path: Path) -> None:
    d = Driver(tmp_path, ["events", "orders"], limit=2)
    d.tick("orders", compaction(), NOT_DUE_CHECKPOINT)
    d.tick("events", compaction(), NOT_DUE_CHECKPOINT)
    assert len(d.launcher.in_flight()) == 2
    # events' checkpoint falls due while both compactions run: no slot is free
    tick = d.tick("events", compaction(), DUE_CHECKPOINT)
    assert len(d.launcher.in_flight()) == 2, d.launcher.in_flight()
    assert reason_of(tick, "Checkpointing") == Reason.CONCURRENCY_LIMIT


def test_the_tally_of_runs_in_flight_counts_every_table_but_the_asker() -> None:
    """Each tick asks how many runs the other tables have in flight; the tally keeps the sum
    as ticks report (summing every table at each tick was quadratic in the tables)."""
    from txntable.config import Config
    from txntable.controller.tick import Operator, RunsInFlight

    tally = RunsInFlight()
    tally.report("a", 2)
    tally.report("b", 1)
    tally.report("c", 0)
    assert (tally.elsewhere("a"), tally.elsewhere("b"), tally.elsewhere("z")) == (1, 2, 3)
    tally.report("a", 1)  # a run of a finished
    assert tally.elsewhere("b") == 1 and tally.elsewhere("z") == 2
    operator = Operator(Config(), launchers=lambda backend: None)  # type: ignore[arg-type,return-value]
    operator.in_flight.report("gone", 3)
    operator.memories.recall("gone")
    operator.forget("gone")  # a deleted table's runs no longer count against the others
    assert operator.in_flight.elsewhere("other") == 0
