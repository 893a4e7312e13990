"""ARM paths are case-insensitive; API Gateway's are not. The fixed segments of an ARM path — ``subscriptions``,
``resourceGroups``, ``providers``, the namespace ``ITL.Accelerator``, the resource types, ``locations``,
``operationStatuses``... — match whatever their casing (ARM RPC: "resource provider namespaces, resource types and
other path segments are case-insensitive"), so ``/subscriptions/s/resourcegroups/rg/providers/itl.accelerator/
sparknodes`` is the same collection as its canonical spelling. API Gateway routes a path only as template.yaml
spells it; a request in any other casing reaches the catch-all route (``/{proxy+}``), whose function
(itl_functions/canonical_path.py) sends it again to the canonical path of the same API.

Pure functions, no I/O. :data:`ROUTE_PATHS` is every ARM route path of template.yaml and of the API's routers:
tests/unit/test_canonical_paths.py keeps the three equal (it is a table here so that the catch-all's cold start
loads neither the routers nor a YAML parser).
"""

from __future__ import annotations

from itl_accelerator.api import paths

_OPERATIONS = paths.LOCATION

#: Every ARM route path (``/subscriptions/...``, ``/providers/...``) of template.yaml, the catch-all excepted.
ROUTE_PATHS: tuple[str, ...] = (
    "/providers/ITL.Accelerator/operations",
    "/subscriptions/{subscriptionId}",
    paths.SUBSCRIPTION + "/auditEvents",
    paths.SUBSCRIPTION + "/slo",
    _OPERATIONS + "/operationStatuses/{operationId}",
    _OPERATIONS + "/operationResults/{operationId}",
    paths.NODES_OF_SUBSCRIPTION,
    paths.JOBS_OF_SUBSCRIPTION,
    paths.NODES,
    paths.NODE,
    paths.NODE + "/stats",
    paths.INSTANCES,
    paths.INSTANCE,
    paths.INSTANCE + "/stats",
    paths.JOBS,
    paths.JOB,
    paths.JOB + "/cancel",
    paths.JOB + "/stats",
    paths.JOB + "/logs",
    paths.QUOTAS,
    paths.QUOTA,
    paths.USAGES,
    paths.COST_QUERY,
    paths.BUDGETS,
    paths.BUDGET,
)


def _segments(path: str) -> list[str]:
    return path.strip("/").split("/")


def _literals(template: str) -> int:
    return sum(not s.startswith("{") for s in _segments(template))


#: Templates with more fixed segments first: a fixed segment is a better match than a parameter.
_ORDERED = sorted(ROUTE_PATHS, key=_literals, reverse=True)


def canonical_path(path: str) -> str | None:
    """``path`` with each fixed segment spelt as its route spells it (parameters kept as sent), or None when no
    route matches it whatever the casing. ``/subscriptions/s/RESOURCEGROUPS/rg/providers/itl.accelerator/sparkNodes``
    → ``/subscriptions/s/resourceGroups/rg/providers/ITL.Accelerator/sparkNodes``."""
    if not path.startswith("/") or path.endswith("/"):
        return None  # a trailing slash is another path (API Gateway's), whatever the casing
    sent = _segments(path)
    for template in _ORDERED:
        wanted = _segments(template)
        if len(wanted) != len(sent):
            continue
        spelt = []
        for fixed, value in zip(wanted, sent, strict=True):
            if fixed.startswith("{"):
                if not value:
                    break
                spelt.append(value)
            elif fixed.lower() == value.lower():
                spelt.append(fixed)
            else:
                break
        else:
            return "/" + "/".join(spelt)
    return None
