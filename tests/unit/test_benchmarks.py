"""The benchmarks ``./dev bench`` runs stay runnable as the template grows (a function added without its cold-start
target broke the whole cold-start table once: BudgetMonitorFunction, issue 26)."""

from __future__ import annotations

from benchmarks.requests_and_cold_start import cold_start_targets
from itl_local.template import Template


def test_every_function_of_the_template_has_a_cold_start_target():
    names = [name for name, _, _ in cold_start_targets()]
    assert set(Template().functions()) <= set(names)


def test_every_api_function_measured_as_an_operation_is_one():
    """An API function measured by building its one-operation app has an ``operation_id`` (a plain handler, like
    the DGX callbacks', is measured as its import)."""
    import importlib

    from benchmarks.requests_and_cold_start import PLAIN_API_FUNCTIONS

    template = Template()
    api_functions = {r.function_id for r in template.routes}
    for name, props in template.functions().items():
        if name in api_functions and name not in PLAIN_API_FUNCTIONS and name != "McpFunction":
            module, _, attr = props["Handler"].rpartition(".")
            assert hasattr(getattr(importlib.import_module(module), attr), "operation_id"), name


def test_every_service_a_cold_start_builds_is_one_the_wiring_has():
    from benchmarks.requests_and_cold_start import SERVICES
    from itl_accelerator.settings import Settings
    from itl_accelerator.wiring import Wiring

    wiring = Wiring.build(Settings(table_name="bench"))
    assert [s for s in SERVICES.values() if s != "settings" and not hasattr(type(wiring), s)] == []
    assert wiring.settings.table_name == "bench"


def test_one_cold_start_target_of_each_kind_runs():
    """What the cold-start table runs, for one function of each kind (an operation's app, a plain handler, the
    authorizer, a workflow step or schedule's service, the MCP server), in a fresh interpreter as it does."""
    import subprocess
    import sys

    from benchmarks.requests_and_cold_start import _CHILD, REPO_ROOT, _child_environment

    kinds: dict[str, str] = {}
    for _, what, body in cold_start_targets()[2:]:
        kind = what.partition(" + ")[2].split(".")[0] or "plain"
        kinds.setdefault(kind, body)
    assert {"build_app", "plain", "TokenValidator", "Wiring", "MCP app"} <= set(kinds)
    for kind, body in kinds.items():
        done = subprocess.run(
            [sys.executable, "-c", _CHILD.format(body=body)],
            cwd=REPO_ROOT,
            env=_child_environment(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"{kind}: {done.stderr[-2000:]}"


def test_every_benchmark_module_imports():
    """A benchmark that imports what a change removed fails only when ``./dev bench`` runs it (usage_billing.py
    imported billing_export's ``_line`` long after it was gone): each module of benchmarks/ imports here."""
    import importlib
    import pkgutil

    import benchmarks

    names = [m.name for m in pkgutil.iter_modules(benchmarks.__path__) if not m.name.startswith("_")]
    assert len(names) >= 10, names
    for name in names:
        importlib.import_module(f"benchmarks.{name}")
