"""The alert rules pass ``promtool check rules`` and their unit tests in ``tests/promtool/``.

promtool comes from Debian's ``prometheus`` package, which ``make sysdeps`` installs; set
``PROMTOOL`` to use another binary. A missing promtool fails these tests (it never skips them):
the rules are only shipped because these tests hold.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "charts" / "txntable-operator" / "files" / "prometheus-rules.yaml"
UNIT_TESTS = sorted((REPO / "tests" / "promtool").glob("*.yaml"))


def promtool() -> str:
    found = os.environ.get("PROMTOOL") or shutil.which("promtool")
    if not found:
        pytest.fail(
            "promtool not found: install Debian's prometheus package "
            "(`make sysdeps`, or apt-get install --no-install-recommends prometheus) "
            "or point PROMTOOL at a promtool binary"
        )
    return found


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_rules_file_passes_promtool_check() -> None:
    done = run("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_has_a_unit_test_that_fires_it() -> None:
    alerts = {
        rule["alert"]
        for group in yaml.safe_load(RULES.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    }
    fired: set[str] = set()
    for path in UNIT_TESTS:
        for case in yaml.safe_load(path.read_text())["tests"]:
            for check in case.get("alert_rule_test", []):
                if check.get("exp_alerts"):
                    fired.add(check["alertname"])
    assert alerts, "no alerts in the rules file"
    assert alerts <= fired, f"alerts without a firing unit test: {sorted(alerts - fired)}"


def test_promtool_unit_tests_pass() -> None:
    assert UNIT_TESTS, "tests/promtool/*.yaml are missing"
    done = run("test", "rules", *map(str, UNIT_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_broken_expectation_fails_promtool(tmp_path: Path) -> None:
    """The unit tests can fail: the same test with a wrong expected label does."""
    source = UNIT_TESTS[0]
    case = yaml.safe_load(source.read_text())
    case["rule_files"] = [str(RULES)]
    for test in case["tests"]:
        for check in test.get("alert_rule_test", []):
            for alert in check.get("exp_alerts") or []:
                alert["exp_labels"]["severity"] = "page-me-never"
    broken = tmp_path / "broken.test.yaml"
    broken.write_text(yaml.safe_dump(case))
    done = run("test", "rules", str(broken))
    assert done.returncode != 0
    assert "FAILED" in done.stdout + done.stderr
