"""``TableMemories``: what the controller keeps per table is one record, forgotten in one call.

A table that ran through ticks (observed, planned, launched, recorded, held) leaves nothing in
any sub-record once forgotten, and its metric series go with it; a sub-record nobody has
written yet (a module added tomorrow) is forgotten with the rest without anyone listing it; a
storage failure reopens the table without forgetting what the controller learnt of its runs.
The last test keeps the next per-table dict from being added beside the memory: the controller's
classes may keep no dict keyed by table outside it.
"""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path

from tests.support.controller import T0, Controller, compaction, fragmented, txntable
from txntable.controller.foresee import Foreseen, Sized
from txntable.controller.holds import HeldSteps
from txntable.controller.memory import TableMemories, TableMemory
from txntable.controller.run_records import Recorded
from txntable.controller.tick import Observed
from txntable.launch import RunState

KEY = "uid-1"
SERIES = "txntable_table_version"
OPERATOR = Path(__file__).resolve().parents[3] / "operator" / "txntable"


def _ticked(tmp_path: Path) -> Controller:
    """A controller that observed the table, planned, launched a run and recorded its end."""
    fragmented(tmp_path / "t")
    c = Controller(txntable(tmp_path / "t"))
    policy = compaction(spark={"autoSize": {"enabled": True}})
    c.tick(compaction=[policy])
    (name,) = c.launcher.launched
    c.finish(name, RunState.SUCCEEDED, {"numFilesRemoved": 4, "numFilesAdded": 1})
    for s in (10, 20):
        c.tick(T0 + timedelta(seconds=s), compaction=[policy])
    return c


def test_a_forgotten_table_leaves_nothing_in_any_sub_record(tmp_path: Path) -> None:
    c = _ticked(tmp_path)
    memories = c.operator.memories
    kept = {type(r) for r in memories.recall(KEY).records()}
    assert {Observed, Foreseen, HeldSteps, Recorded, Sized} <= kept
    observed = memories.peek(KEY, Observed)
    assert observed is not None and observed.summary is not None
    recorded = memories.peek(KEY, Recorded)
    assert recorded is not None and recorded.by_run
    assert c.sample(SERIES) is not None
    c.operator.forget(KEY)
    assert KEY not in memories and memories.keys() == []
    for kind in kept:
        assert memories.peek(KEY, kind) is None
        assert memories.each(kind) == []
    assert c.sample(SERIES) is None  # its metric series went with it
    # the table seen again starts from nothing and is observed afresh
    tick = c.tick(T0 + timedelta(seconds=30), compaction=[compaction()])
    assert tick.status.version is not None and memories.peek(KEY, Observed) is not None


def test_a_sub_record_added_later_is_forgotten_too() -> None:
    class Tomorrow:  # a module that does not exist yet keeps something per table
        def __init__(self) -> None:
            self.seen: dict[str, int] = {}

    memories = TableMemories()
    told: list[tuple[str, TableMemory]] = []
    memories.on_forget(lambda key, memory: told.append((key, memory)))
    memories.of("t1", Tomorrow).seen["x"] = 1
    memories.of("t2", Tomorrow).seen["y"] = 2
    assert memories.of("t1", Tomorrow).seen == {"x": 1}  # one record per table, kept
    memories.forget("t1")
    assert memories.peek("t1", Tomorrow) is None
    assert [key for key, _ in memories.each(Tomorrow)] == ["t2"]
    assert memories.of("t1", Tomorrow).seen == {}  # seen again: a fresh record
    ((key, memory),) = told
    assert key == "t1" and isinstance(memory.peek(Tomorrow), Tomorrow)


def test_a_storage_failure_reopens_the_table_but_keeps_what_was_learnt(tmp_path: Path) -> None:
    c = _ticked(tmp_path)
    memories = c.operator.memories
    recorded = memories.peek(KEY, Recorded)
    assert recorded is not None and recorded.by_run
    c.operator.reopen(KEY)
    observed = memories.peek(KEY, Observed)
    assert observed is not None and observed.table is None and observed.summary is None
    assert memories.peek(KEY, Recorded) is recorded and recorded.by_run
    tick = c.tick(T0 + timedelta(seconds=30), compaction=[compaction()])
    assert tick.status.version is not None and observed.summary is not None


#: Dicts the controller's classes may keep that are not per table (what each is keyed by).
NOT_PER_TABLE = {
    ("controller/memory.py", "TableMemory", "_records"),  # sub-records of one table, by type
    ("controller/memory.py", "TableMemories", "_tables"),  # the memory itself
    ("handlers/shards.py", "Shards", "_held"),  # by shard number: until when it is held
    ("handlers/shards.py", "Shards", "_seen"),  # by Lease name: the version first seen when
    ("handlers/shards.py", "Shards", "_releasing"),  # by shard number: when it was given up
    ("handlers/parsed_resources.py", "ParsedResources", "_parsed"),  # by resource, newest parse
    ("handlers/parsed_resources.py", "ParsedResources", "_splits"),  # by (parser, namespace)
    ("handlers/governed_views.py", "GovernedViews", "_views"),  # by (namespace, kind)
    # the table bodies by namespace and uid, as Kopf's index kept them: put/dropped by events
    ("handlers/table_index.py", "TableIndex", "_by_namespace"),
    # a tally every tick reads (the sum kept beside it), dropped through on_forget
    ("controller/tick.py", "RunsInFlight", "_runs"),
    ("handlers/secret_cache.py", "SecretCache", "_entries"),  # by Secret
    # local mode's stand-in for the API server's statuses, dropped through on_forget
    ("handlers/status_writer.py", "MemoryStatus", "statuses"),
    ("handlers/status_writer.py", "Written", "status"),  # one table's status document
    ("handlers/status_writer.py", "Stored", "status"),  # a status document, not kept
    ("handlers/liveness.py", "Liveness", "_in_flight"),  # reconciles in flight, ended by end()
    ("controller/run_records.py", "Recorded", "by_run"),  # one table's runs, by run name
    (
        "controller/run_records.py",
        "Recorded",
        "waiting_said",
    ),  # one table's runs in flight, by name
    ("controller/holds.py", "HeldSteps", "refused"),  # one table's, by run kind
    ("controller/holds.py", "HeldSteps", "unsupported"),
    ("controller/holds.py", "HeldSteps", "announced"),  # one table's, by condition type
    ("handlers/commit_events.py", "ProbeStats", "events"),  # by event source
    # commit events are watched by their own threads; forgotten through on_forget (unwatch)
    ("handlers/commit_events.py", "CommitEvents", "_watched"),
    ("handlers/commit_events.py", "CommitEvents", "_pending"),
    ("handlers/commit_events.py", "CommitEvents", "_queues"),  # by SQS queue
    ("handlers/sqs_source.py", "SqsQueue", "_routes"),  # routes of one queue
    ("launch/run_cache.py", "_Namespace", "by_table"),  # the API's listing, replaced each time
    ("launch/run_cache.py", "_Namespace", "launched"),  # by run, until the next listing
    ("launch/run_cache.py", "_Namespace", "deleted"),
    ("launch/run_cache.py", "CachedRuns", "_namespaces"),  # by namespace
    ("launch/local.py", "LocalLauncher", "_children"),  # by run directory
}


def _dict_attributes(path: Path) -> set[tuple[str, str]]:
    """(class, attribute) of every attribute a class of ``path`` declares or assigns as a
    dict (``x: dict[...]`` in its body, ``self.x: dict[...] = ...`` or ``self.x = {}``)."""
    found: set[tuple[str, str]] = set()
    for cls in (n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)):
        for node in ast.walk(cls):
            target, annotation, value = None, None, None
            if isinstance(node, ast.AnnAssign):
                target, annotation, value = node.target, node.annotation, node.value
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                name = target.attr if target.value.id == "self" else None
            elif isinstance(target, ast.Name) and node in cls.body:
                name = target.id
            else:
                name = None
            text = ast.unparse(annotation) if annotation is not None else ""
            is_dict = text.startswith(("dict[", "Dict[")) or isinstance(value, ast.Dict)
            if name and is_dict and not name.isupper():
                found.add((cls.name, name))
    return found


def test_no_per_table_dict_is_kept_beside_the_memory() -> None:
    found = {
        (str(path.relative_to(OPERATOR)), cls, attr)
        for folder in ("handlers", "controller", "launch")
        for path in sorted((OPERATOR / folder).glob("*.py"))
        for cls, attr in _dict_attributes(path)
    }
    unknown = found - NOT_PER_TABLE
    assert not unknown, (
        f"dicts kept by the controller's classes outside controller.memory: {sorted(unknown)}; "
        "per table, keep a sub-record in TableMemory (memories.of(key, YourRecord)); "
        "else add it to NOT_PER_TABLE with what it is keyed by"
    )
    assert not NOT_PER_TABLE - found, "entries of NOT_PER_TABLE that are gone: remove them"


class _Watches:
    """The driver's commit events, as far as forgetting goes."""

    def __init__(self) -> None:
        self.unwatched: list[str] = []

    def unwatch(self, key: str) -> None:
        self.unwatched.append(key)


def test_the_driver_and_the_writer_forget_what_they_wired_themselves() -> None:
    """A forgotten table is unwatched for commits and its status dropped from local mode's
    store without its caller wiring either by hand (the Kopf start-up and local mode each did,
    and a third caller would have had to remember to)."""
    from txntable.config import Config
    from txntable.controller.tick import Operator
    from txntable.handlers.driver import Driver
    from txntable.handlers.status_writer import Current, MemoryStatus, StatusWriter

    operator = Operator(config=Config(), launchers=lambda _b: None)  # type: ignore[arg-type,return-value]
    store, watches = MemoryStatus(), _Watches()
    writer = StatusWriter(operator.memories, store)
    driver = Driver(operator, writer)
    driver.events = watches  # type: ignore[assignment]  # set after the driver, as at start-up
    writer.write(KEY, "default", "events", Current({}), {"phase": "Healthy"})
    assert KEY in store.statuses
    operator.forget(KEY)
    assert KEY not in store.statuses and watches.unwatched == [KEY]
