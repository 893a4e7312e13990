"""ARM paths are case-insensitive; API Gateway's are not. The fixed segments of an ARM path — ``subscriptions``,
``resourceGroups``, ``providers``, the namespace ``ITL.Accelerator``, the resource types, ``locations``,
``operationStatuses``... — match whatever their casing (ARM RPC: "resource provider namespaces, resource types and
other path segments are case-insensitive"), so ``/subscriptions/s/resourcegroups/rg/providers/itl.accelerator/
sparknodes`` is the same collection as its canonical spelling. API Gateway routes a path only as template.yaml
spells it; a request in any other casing reaches the catch-all route (``/{proxy+}``), whose function
(itl_functions/canonical_path.py) sends it again to the canonical path of the same API.

Pure functions, no I/O. :data:`ROUTE_PATHS` is every ARM route path of the API's routers, written here by
``./dev generate`` (a table, so that the catch-all's cold start loads neither the routers nor a YAML parser);
tests/unit/test_canonical_paths.py keeps it equal to template.yaml's routes and the routers'.
"""

from __future__ import annotations

#: Every ARM route path (``/subscriptions/...``, ``/providers/...``) of template.yaml, the catch-all excepted.
ROUTE_PATHS: tuple[str, ...] = (
    # >>> generated: route-paths - from the routers' ARM routes; ./dev generate writes this, edit the source
    "/providers/ITL.Accelerator/operations",
    "/subscriptions/{subscriptionId}",
    "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/auditEvents",
    "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/billingExports/{day}",
    "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/budgets",
    "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/budgets/{budgetName}",
    "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/capacityReservations",
    "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/costQuery",
    "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/locations/{location}/offers",
    "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/locations/{location}/operationResults/{operationId}",
    "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/locations/{location}/operationStatuses/{operationId}",
    "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/locations/{location}/quotas",
    "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/locations/{location}/quotas/{quotaName}",
    "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/locations/{location}/usages",
    "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/slo",
    "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/sparkJobs",
    "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/sparkNodes",
    "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/capacityReservations",
    "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/capacityReservations/{reservationName}",
    "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/sparkJobs",
    "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/sparkJobs/{jobName}",
    "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/sparkJobs/{jobName}/cancel",
    "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/sparkJobs/{jobName}/logs",
    "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/sparkJobs/{jobName}/stats",
    "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/sparkNodes",
    "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/sparkNodes/{nodeName}",
    "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/sparkNodes/{nodeName}/sparkOllamaInstances",
    "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/sparkNodes/{nodeName}/sparkOllamaInstances/{instanceName}",
    "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/sparkNodes/{nodeName}/sparkOllamaInstances/{instanceName}/stats",
    "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/sparkNodes/{nodeName}/stats",
    # <<< generated: route-paths
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
