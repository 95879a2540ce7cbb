"""Start-up stays cheap: ``import txntable``, building the ``txntable`` parser and any ``--help``
load none of the heavy libraries (pyarrow, fsspec, prometheus_client, YAML, Spark, Kopf, the
Kubernetes client, boto3); each subcommand loads them only when it runs.

Every job and every command is a fresh interpreter, so what the package imports up front is paid
on every run (before this guard: 0.27 s and 103 MB for ``import txntable`` alone, pyarrow
included). Checked by module names in a fresh child interpreter, not by timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from tests.unit.case_ids import readable

#: libraries a process that has not started real work must not have loaded
HEAVY = (
    "pyarrow",
    "fsspec",
    "prometheus_client",
    "yaml",
    "pyspark",
    "kopf",
    "kubernetes",
    "boto3",
    "botocore",
    "deltalake",
)

_PROBE = """
import contextlib, io, json, sys
{setup}
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def _loaded_after(setup: str) -> list[str]:
    """The heavy libraries a fresh interpreter has loaded after running ``setup``."""
    code = _PROBE.format(setup=setup, heavy=HEAVY)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_importing_the_package_and_its_errors_loads_nothing_heavy() -> None:
    assert _loaded_after("import txntable, txntable.engine, txntable.engine.errors") == []


def test_a_name_from_the_engine_face_loads_only_its_own_module() -> None:
    """Callers outside the engine import its face (pyproject.toml's protected contract), so the
    face must cost what the module behind the name costs and no more."""
    setup = (
        "from txntable.engine import EngineError\n"
        "engine = sorted(m for m in sys.modules if m.startswith('txntable.engine'))\n"
        "assert engine == ['txntable.engine', 'txntable.engine.errors'], engine"
    )
    assert _loaded_after(setup) == []


def test_building_the_command_line_loads_nothing_heavy() -> None:
    setup = "import txntable.cli.main as m\nm.build_parser()"
    assert _loaded_after(setup) == []


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        ["inspect", "--help"],
        ["optimize", "--help"],
        ["vacuum", "--help"],
        ["checkpoint", "--help"],
        ["cleanup", "--help"],
        ["run", "--help"],
        ["demo", "--help"],
        ["inspect"],  # a usage error: exit 2 before anything is opened
    ],
    ids=readable,
)
def test_help_version_and_usage_errors_load_nothing_heavy(argv: list[str]) -> None:
    setup = (
        "import txntable.cli.main as m\n"
        "quiet = io.StringIO()\n"
        "with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):\n"
        "    try:\n"
        f"        m.main({argv!r})\n"
        "    except SystemExit:\n"
        "        pass"
    )
    assert _loaded_after(setup) == []


def test_the_optimize_job_parses_its_arguments_without_the_engine() -> None:
    setup = (
        "from txntable.jobs.optimize import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        main(['--help'])\n"
        "    except SystemExit:\n"
        "        pass"
    )
    assert _loaded_after(setup) == []


def test_a_command_that_runs_loads_what_it_needs(tmp_path: Path) -> None:
    """The laziness is not a stub: ``inspect`` on a real table loads pyarrow and answers, and
    only pyarrow (a local table needs no fsspec, no object-store client, no metrics)."""
    from txntable.engine.table import Table

    location = str(tmp_path / "t")
    Table.create(location, pa.schema([("id", pa.int64())])).append(pa.table({"id": [1, 2]}))
    setup = (
        "import txntable.cli.main as m\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    code = m.main(['inspect', {location!r}, '--json'])\n"
        "assert code == 0 and json.loads(out.getvalue())['numFiles'] == 1, out.getvalue()"
    )
    assert _loaded_after(setup) == ["pyarrow"]


def test_reading_a_table_skips_the_write_path(tmp_path: Path) -> None:
    from txntable.engine.table import Table

    location = str(tmp_path / "t")
    Table.create(location, pa.schema([("id", pa.int64())])).append(pa.table({"id": [1, 2]}))
    setup = (
        "from txntable.engine.table import Table\n"
        f"assert Table.open({location!r}).snapshot().num_files == 1\n"
        "writing = [m for m in ('txntable.engine.write.api', 'txntable.engine.commit.transaction', "
        "'txntable.engine.write.writer') if m in sys.modules]\n"
        "assert writing == [], writing"
    )
    assert _loaded_after(setup) == ["pyarrow"]


def test_the_public_names_resolve_on_first_use() -> None:
    import importlib

    import txntable
    import txntable.engine
    from txntable.engine.commit.transaction import CommitOptions, CommitResult, Transaction
    from txntable.engine.errors import ConcurrentModificationException, EngineError
    from txntable.engine.read.snapshot import Snapshot
    from txntable.engine.table import Table

    expected = {
        "CommitOptions": CommitOptions,
        "CommitResult": CommitResult,
        "ConcurrentModificationException": ConcurrentModificationException,
        "EngineError": EngineError,
        "Snapshot": Snapshot,
        "Table": Table,
        "Transaction": Transaction,
    }
    assert {name: getattr(txntable, name) for name in txntable.__all__} == expected
    for name in txntable.__all__:
        assert getattr(txntable.engine, name) is expected[name]
    for name in txntable.engine.__all__:  # each from the module that defines it
        module_name, attribute = txntable.engine._LAZY[name]
        module = importlib.import_module(module_name)
        value = module if attribute is None else getattr(module, attribute)
        assert getattr(txntable.engine, name) is value
        if attribute is None:  # a module of the engine (``retention``)
            assert value.__name__.startswith("txntable.engine.")
        elif callable(value):  # a class or function, not one re-exported from elsewhere
            assert value.__module__.startswith("txntable.engine.")
    # every name the face loads is one it declares: nothing reaches past it unlisted
    assert sorted(txntable.engine._LAZY) == sorted(txntable.engine.__all__)
    assert set(txntable.engine.__all__) <= set(dir(txntable.engine))
    assert set(txntable.__all__) <= set(dir(txntable))
    with pytest.raises(AttributeError, match="no attribute 'Tabel'"):
        _ = txntable.Tabel
    with pytest.raises(AttributeError, match="no attribute 'Tabel'"):
        _ = txntable.engine.Tabel


def test_the_api_models_resolve_on_first_use_and_a_size_parser_loads_none_of_them() -> None:
    import importlib

    import txntable.api

    for name in txntable.api.__all__:
        module = {"ApiError": "errors", "InvalidSpecError": "errors"}.get(name)
        if module is None:
            module = "types" if "Polic" in name or name.startswith("TxnTable") else "conditions"
        assert getattr(txntable.api, name) is getattr(
            importlib.import_module(f"txntable.api.{module}"), name
        )
    setup = (
        "from txntable.api.quantity import parse_size\n"
        "assert parse_size('1Ki') == 1024\n"
        "assert 'txntable.api.types' not in sys.modules, 'the models were loaded'"
    )
    assert _loaded_after(setup) == []


def test_the_job_states_the_vacuum_spark_threshold_of_the_vacuum_module() -> None:
    """``--vacuum-spark-min-files`` repeats the threshold so that parsing stays cheap."""
    from txntable.jobs.optimize import VACUUM_SPARK_MIN_FILES
    from txntable.maintenance.vacuum_spark import SPARK_MIN_FILES

    assert VACUUM_SPARK_MIN_FILES == SPARK_MIN_FILES


def test_the_job_states_the_distributed_zorder_threshold_of_the_executor() -> None:
    """``--distribute-zorder-above`` repeats the threshold so that parsing stays cheap."""
    from txntable.api.quantity import parse_size
    from txntable.jobs.optimize import DISTRIBUTE_ZORDER_ABOVE
    from txntable.maintenance.executor_spark import DISTRIBUTE_ZORDER_ABOVE as EXECUTOR

    assert parse_size(DISTRIBUTE_ZORDER_ABOVE) == EXECUTOR
