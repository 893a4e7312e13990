"""The catch-all route's casing table (itl_accelerator/api/canonical.py) against what it corrects: every ARM route of
template.yaml and of the API's routers. When a route is added and the table is not, a request to it in another
casing is a 404 where every other route is corrected (issue 28: ``.../logs`` and ``.../slo`` were)."""

from __future__ import annotations

import pytest

from itl_accelerator.api.app import all_routers
from itl_accelerator.api.canonical import ROUTE_PATHS, canonical_path
from itl_local.template import Template

ARM_PREFIXES = ("/subscriptions", "/providers")


def _arm(paths: set[str]) -> set[str]:
    return {p for p in paths if p.startswith(ARM_PREFIXES)}


def test_the_casing_table_is_every_arm_route_of_the_template() -> None:
    template = _arm({r.path for r in Template().routes})
    assert set(ROUTE_PATHS) == template, {"missing": template - set(ROUTE_PATHS), "extra": set(ROUTE_PATHS) - template}


def test_the_casing_table_is_every_arm_route_of_the_routers() -> None:
    routed = _arm({route.path for router in all_routers() for route in router.routes})  # type: ignore[attr-defined]
    assert set(ROUTE_PATHS) == routed, {"missing": routed - set(ROUTE_PATHS), "extra": set(ROUTE_PATHS) - routed}


@pytest.mark.parametrize("route", sorted(ROUTE_PATHS))
def test_every_route_in_another_casing_comes_back_as_the_route_spells_it(route: str) -> None:
    segments = route.split("/")
    spelt = "/".join(f"Value-{s[1:-1]}" if s.startswith("{") else s for s in segments)  # values keep their case
    for recase in (str.lower, str.upper):
        sent = "/".join(f"Value-{s[1:-1]}" if s.startswith("{") else recase(s) for s in segments)
        assert canonical_path(sent) == spelt


def test_a_job_log_and_the_slo_in_another_casing_are_corrected() -> None:
    job = "/subscriptions/s1/resourcegroups/rg1/providers/itl.accelerator/sparkjobs/train-1/LOGS"
    assert (
        canonical_path(job) == "/subscriptions/s1/resourceGroups/rg1/providers/ITL.Accelerator/sparkJobs/train-1/logs"
    )
    slo = "/subscriptions/s1/providers/ITL.ACCELERATOR/SLO"
    assert canonical_path(slo) == "/subscriptions/s1/providers/ITL.Accelerator/slo"
