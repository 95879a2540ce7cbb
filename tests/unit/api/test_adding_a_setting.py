"""Adding an OPTIMIZE setting touches the files ``api.optimize_options`` promises, and no more.

Each test adds a throwaway setting to a temporary copy of the package (and of the CRDs), then
runs the real code of that copy in a child process: the job's flag, its help, its range, the
JSON the controller sends, and, for a setting a policy feeds, the CRD-model agreement check and
the controller-to-job round trip. The set of files that differ from the checkout is the count
the module docstring gives; a setting that needed one more file of plumbing would fail here,
because the copy's code would not carry it.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
PACKAGE = REPO / "operator" / "txntable"
CRD = "txntable.io_compactionpolicies.yaml"
CRD_COPIES = (Path("crds"), Path("charts/txntable-operator/files/crds"))

#: the job-level setting: a field of the record and nothing else
JOB_FIELD = """
    throwaway_limit: int | None = _setting(
        None,
        name="--throwaway-limit",
        kind=COUNT,
        minimum=3,
        unit="things",
        metavar="N",
        help="a setting only this test knows",
    )
"""
#: ...and the lines that make it a policy's too
SPEC_FIELD = "    throwaway_limit: int | None = spec_field(None, minimum=3, maximum=100)\n"
FROM_SPEC_LINE = "            throwaway_limit=spec.throwaway_limit,\n"


def _insert(path: Path, anchor: str, text: str, *, after: bool = False) -> None:
    source = path.read_text()
    assert source.count(anchor) == 1, f"{path.name}: the anchor {anchor!r} moved"
    at = source.index(anchor) + (len(anchor) if after else 0)
    path.write_text(source[:at] + text + source[at:])


def _copy(tmp: Path) -> Path:
    root = tmp / "copy"
    shutil.copytree(
        PACKAGE, root / "operator" / "txntable", ignore=shutil.ignore_patterns("__pycache__")
    )
    for where in CRD_COPIES:
        (root / where).mkdir(parents=True)
        shutil.copy(REPO / where / CRD, root / where / CRD)
    return root


def _changed(root: Path) -> set[str]:
    """The files of the copy that differ from the checkout (relative paths)."""
    changed = set()
    for path in (root / "operator").rglob("*.py"):
        rel = path.relative_to(root)
        if not filecmp.cmp(path, REPO / rel, shallow=False):
            changed.add(str(rel))
    for where in CRD_COPIES:
        if not filecmp.cmp(root / where / CRD, REPO / where / CRD, shallow=False):
            changed.add(str(where / CRD))
    return changed


def _run(root: Path, script: str) -> None:
    """``script`` in a child whose ``txntable`` is the copy's (the tests' helpers are ours)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "operator"), str(REPO)])}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        check=False,
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _add_job_setting(root: Path) -> None:
    _insert(
        root / "operator/txntable/api/optimize_options.py",
        "    def __post_init__(self) -> None:\n        errors = [*_out_of_range",
        JOB_FIELD.lstrip("\n") + "\n",
    )


def test_a_job_setting_is_one_field(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _add_job_setting(root)
    assert _changed(root) == {"operator/txntable/api/optimize_options.py"}
    _run(
        root,
        """
        import argparse, contextlib, io
        import pytest
        from txntable.api.optimize_options import OptimizeOptions
        from txntable.jobs.optimize import add_arguments, options_from_args
        from txntable.maintenance.errors import InvalidPolicyError

        parser = argparse.ArgumentParser()
        add_arguments(parser)
        assert "a setting only this test knows" in parser.format_help()
        got = options_from_args(parser.parse_args(["t", "--throwaway-limit", "5"]))
        assert got.throwaway_limit == 5
        assert OptimizeOptions.loads(got.dumps()) == got
        assert got.to_json()["throwawayLimit"] == 5
        with contextlib.redirect_stderr(io.StringIO()), pytest.raises(SystemExit):
            parser.parse_args(["t", "--throwaway-limit", "2"])  # the flag's own range
        doc = '{"throwawayLimit": 2}'
        with pytest.raises(InvalidPolicyError, match="throwawayLimit: must be at least 3 things"):
            options_from_args(parser.parse_args(["t", "--options-json", doc]))
        """,
    )


def _add_to_crd(root: Path) -> None:
    for where in CRD_COPIES:
        path = root / where / CRD
        crd: dict[str, Any] = yaml.safe_load(path.read_text())
        spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        spec["properties"]["throwawayLimit"] = {
            "type": "integer",
            "minimum": 3,
            "maximum": 100,
            "description": "A setting only this test knows.",
        }
        path.write_text(yaml.safe_dump(crd, sort_keys=False))


def test_a_policy_setting_is_the_crd_the_model_and_the_record(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    _add_job_setting(root)
    _insert(
        root / "operator/txntable/api/optimize_options.py",
        "dictionary=parquet.dictionary.value.lower() if parquet.dictionary else None,\n",
        FROM_SPEC_LINE,
        after=True,
    )
    _insert(
        root / "operator/txntable/api/policies.py",
        "    spark: CompactionSparkTemplate = spec_field(factory=CompactionSparkTemplate)\n",
        SPEC_FIELD,
        after=True,
    )
    _add_to_crd(root)
    assert _changed(root) == {
        "operator/txntable/api/optimize_options.py",
        "operator/txntable/api/policies.py",
        f"crds/{CRD}",
        f"charts/txntable-operator/files/crds/{CRD}",
    }
    _run(
        root,
        f"""
        import argparse
        import yaml
        from tests.unit.crd_models import compare
        from tests.unit.policy_support import compaction_args, compaction_policy
        from txntable.api.policies import CompactionPolicySpec
        from txntable.jobs.optimize import add_arguments, options_from_args

        crd = yaml.safe_load(open("crds/{CRD}"))
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert compare(CompactionPolicySpec, schema, "spec") == []
        args = list(compaction_args(compaction_policy({{"throwawayLimit": 7}})))
        at = args.index("--master")
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        assert options_from_args(parser.parse_args(args[:at] + args[at + 2 :])).throwaway_limit == 7
        """,
    )
