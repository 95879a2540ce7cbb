"""The controller's permission list (``txntable.handlers.permissions``) covers what the handler
code calls, derived from the code itself: Kubernetes client methods called in
``txntable.handlers`` (``read_namespaced_secret`` -> get secrets ...), the resources the Kopf
decorators watch (Kopf lists, watches and patches them, and patches their status), and
``kopf.event``. The launchers' own calls are checked by tests/unit/launch/test_launch_kubernetes.py
and the chart's RBAC against this list by tests/unit/deploy/test_chart_rbac.py.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from txntable.api import constants
from txntable.handlers.permissions import CONTROLLER, Scope, controller_permissions

HANDLERS = Path(constants.__file__).resolve().parents[1] / "handlers"
VERBS = {"read": "get", "list": "list", "create": "create", "patch": "patch", "delete": "delete"}
VERBS |= {"replace": "update"}
#: client method suffix -> (group, plural), for the kinds a handler could plausibly touch
KINDS = {
    "secret": ("", "secrets"),
    "config_map": ("", "configmaps"),
    "pod": ("", "pods"),
    "pod_log": ("", "pods/log"),
    "event": ("", "events"),
    "namespace": ("", "namespaces"),
    "job": ("batch", "jobs"),
    "lease": ("coordination.k8s.io", "leases"),
}
#: the kubernetes client's method names (``read_namespaced_secret``, ``list_namespace``, ...);
#: other objects' methods (``launcher.list_runs``) never carry ``namespaced``
CALL = re.compile(
    r"^(?P<verb>read|list|create|patch|delete|replace)_"
    r"((?P<ns>namespaced_)(?P<kind>[a-z_]+?)|(?P<cluster>namespace))"
    r"(?P<status>_status)?(_for_all_namespaces)?$"
)
KOPF_WATCH = {"on", "timer", "daemon", "index"}


def _granted() -> set[tuple[str, str, str]]:
    return {(p.group, p.resource, v) for _, p in controller_permissions() for v in p.verbs}


def _client_calls(tree: ast.AST) -> set[tuple[str, str, str]]:
    needed = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        match = CALL.match(node.func.attr)
        if not match or match["kind"] == "custom_object":
            continue  # custom objects are launch's business (its own test)
        kind = match["kind"] or match["cluster"]
        assert kind in KINDS, f"unknown client call {node.func.attr}: extend KINDS"
        group, plural = KINDS[kind]
        if match["status"]:
            plural += "/status"
        needed.add((group, plural, VERBS[match["verb"]]))
    return needed


def _constant(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name) and hasattr(constants, node.id):
        return str(getattr(constants, node.id))
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _kopf_calls(tree: ast.AST) -> set[tuple[str, str, str]]:
    needed = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = ast.unparse(node.func)
        if func == "kopf.event":
            needed.add(("", "events", "create"))
        parts = func.split(".")
        if parts[0] != "kopf" or len(parts) < 2 or parts[1] not in KOPF_WATCH:
            continue
        args = [_constant(a) for a in node.args]
        if len(args) >= 3 and args[0] == constants.GROUP and args[2]:
            plural = args[2]
            for verb in ("list", "watch", "patch"):  # Kopf never gets single objects
                needed.add((constants.GROUP, plural, verb))
            needed.add((constants.GROUP, f"{plural}/status", "patch"))
    return needed


def test_handler_calls_are_granted() -> None:
    sources = sorted(HANDLERS.glob("*.py"))
    assert sources
    needed: set[tuple[str, str, str]] = set()
    for path in sources:
        tree = ast.parse(path.read_text())
        needed |= _client_calls(tree) | _kopf_calls(tree)
    missing = needed - _granted()
    assert missing == set(), "add these to txntable/handlers/permissions.py (and the chart)"


def test_the_derivation_sees_calls() -> None:
    code = (
        "from kubernetes import client\n"
        "@kopf.timer(GROUP, VERSION, PLURAL_TABLE, id='x')\n"
        "def f(api):\n"
        "    client.CoreV1Api(api).read_namespaced_secret('s', 'ns')\n"
        "    client.BatchV1Api(api).delete_namespaced_job('j', 'ns')\n"
        "    kopf.event(body, type='Normal', reason='R', message='m')\n"
        "    launcher.list_runs('ns')\n"
        "    client.CoreV1Api(api).list_namespace()\n"
    )
    tree = ast.parse(code)
    assert _client_calls(tree) == {
        ("", "secrets", "get"),
        ("batch", "jobs", "delete"),
        ("", "namespaces", "list"),
    }
    assert ("txntable.io", "txntables", "watch") in _kopf_calls(tree)
    assert ("txntable.io", "txntables/status", "patch") in _kopf_calls(tree)
    assert ("", "events", "create") in _kopf_calls(tree)


def test_list_is_well_formed() -> None:
    seen = set()
    for scope, perm in CONTROLLER:
        assert isinstance(scope, Scope)
        assert perm.verbs and "*" not in perm.verbs and "*" not in perm.resource
        assert (scope, perm.group, perm.resource) not in seen
        seen.add((scope, perm.group, perm.resource))
    # Secrets are only ever read, one by one: never listed or watched
    secrets = [p for s, p in CONTROLLER if p.resource == "secrets"]
    assert [p.verbs for p in secrets] == [("get",)]
