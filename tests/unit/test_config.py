"""The operator configuration: defaults, parsing, and a clear error per bad variable."""

from __future__ import annotations

import pytest

from tests.unit.case_ids import readable
from txntable.config import Config, ConfigError


def test_defaults_are_valid() -> None:
    cfg = Config.from_env({})
    assert cfg.default_backend == "sparkapplication"
    assert cfg.namespaces == []


def test_values_are_parsed_by_type() -> None:
    cfg = Config.from_env(
        {
            "TXNTABLE_MAX_CONCURRENT_RUNS": "7",
            "TXNTABLE_OBSERVE_INTERVAL_SECONDS": "2.5",
            "TXNTABLE_WATCH_NAMESPACES": "a, b,",
            "TXNTABLE_DEFAULT_BACKEND": "local",
            "UNRELATED": "x",
        }
    )
    assert cfg.max_concurrent_runs == 7
    assert cfg.observe_interval_seconds == 2.5
    assert cfg.namespaces == ["a", "b"]
    assert cfg.default_backend == "local"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"TXNTABLE_MAX_CONCURRENT_RUNS": "many"}, "TXNTABLE_MAX_CONCURRENT_RUNS='many'"),
        ({"TXNTABLE_MAX_CONCURRENT_RUNS": "0"}, "MAX_CONCURRENT_RUNS must be >= 1"),
        ({"TXNTABLE_API_REQUESTS_IN_FLIGHT": "0"}, "API_REQUESTS_IN_FLIGHT must be >= 1"),
        ({"TXNTABLE_DEFAULT_BACKEND": "yarn"}, "DEFAULT_BACKEND must be one of"),
        ({"TXNTABLE_METRICS_PORT": "70000"}, "METRICS_PORT must be a port"),
        ({"TXNTABLE_LOG_FORMAT": "xml"}, "LOG_FORMAT"),
        ({"TXNTABLE_OBSERVE_INTERVAL_SECONDS": "-1"}, "OBSERVE_INTERVAL_SECONDS"),
    ],
    ids=readable,
)
def test_bad_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        Config.from_env(env)


def test_every_variable_is_documented() -> None:
    from tests.conftest import REPO

    doc = (REPO / "docs" / "configuration.md").read_text()
    for name, _, _ in Config.variables():
        assert f"`{name}`" in doc, f"{name} missing from docs/configuration.md"
