"""ARM paths of the ITL.Accelerator resource provider (docs/openapi.json; a unit test checks every request the
commands send against it).

Shapes: nodes ``/subscriptions/{sub}/resourceGroups/{rg}/providers/ITL.Accelerator/sparkNodes[/{name}]``; instances
``.../sparkNodes/{node}/sparkOllamaInstances[/{name}]``; jobs ``.../sparkJobs[/{name}]`` and the subscription's
``/subscriptions/{sub}/providers/ITL.Accelerator/sparkJobs``; capacity reservations ``.../capacityReservations[/{name}]``
and the subscription's ``/subscriptions/{sub}/providers/ITL.Accelerator/capacityReservations``; operations
``/subscriptions/{sub}/providers/ITL.Accelerator/locations/{loc}/operationStatuses/{id}``.
"""

from __future__ import annotations

from urllib.parse import quote

NAMESPACE = "ITL.Accelerator"
#: The API version every request names (docs/openapi.json ``info.version``).
API_VERSION = "2026-11-01"
#: Where jobs submitted without a location keep their operations.
GLOBAL_LOCATION = "global"


def _seg(value: str) -> str:
    return quote(value, safe="")


def provider(subscription: str, resource_group: str | None = None) -> str:
    """The provider's root in a subscription, or in one of its resource groups."""
    scope = f"/subscriptions/{_seg(subscription)}"
    if resource_group:
        scope += f"/resourceGroups/{_seg(resource_group)}"
    return f"{scope}/providers/{NAMESPACE}"


def nodes(subscription: str, resource_group: str | None, name: str | None = None) -> str:
    """The nodes of a resource group (or, without one, of the subscription), or one node."""
    base = provider(subscription, resource_group) + "/sparkNodes"
    return f"{base}/{_seg(name)}" if name else base


def instances(subscription: str, resource_group: str, node: str, name: str | None = None) -> str:
    """The instances of a node, or one instance."""
    base = nodes(subscription, resource_group, node) + "/sparkOllamaInstances"
    return f"{base}/{_seg(name)}" if name else base


def jobs(subscription: str, resource_group: str | None, name: str | None = None) -> str:
    """The jobs of a resource group (or, without one, of the subscription), or one job."""
    base = provider(subscription, resource_group) + "/sparkJobs"
    return f"{base}/{_seg(name)}" if name else base


def reservations(subscription: str, resource_group: str | None, name: str | None = None) -> str:
    """The capacity reservations of a resource group (or, without one, of the subscription), or one reservation."""
    base = provider(subscription, resource_group) + "/capacityReservations"
    return f"{base}/{_seg(name)}" if name else base


def audit_events(subscription: str) -> str:
    """The subscription's audit events (admins)."""
    return provider(subscription) + "/auditEvents"


def operation_status(subscription: str, location: str, operation_id: str) -> str:
    """An operation's status resource (what ``Azure-AsyncOperation`` points at)."""
    return f"{provider(subscription)}/locations/{_seg(location)}/operationStatuses/{_seg(operation_id)}"


def stats(resource: str) -> str:
    """A node's, instance's or job's usage statistics: the resource's path (or ARM id) + ``/stats``."""
    return resource.rstrip("/") + "/stats"


def quotas(subscription: str, location: str, name: str | None = None) -> str:
    """The GPU quotas of a subscription in a location, or one."""
    base = provider(subscription) + f"/locations/{_seg(location)}/quotas"
    return f"{base}/{_seg(name)}" if name else base


def offers(subscription: str, location: str) -> str:
    """What a job could get now in a location."""
    return provider(subscription) + f"/locations/{_seg(location)}/offers"


def usages(subscription: str, location: str) -> str:
    """What a subscription holds against its quotas in a location."""
    return provider(subscription) + f"/locations/{_seg(location)}/usages"


def budgets(subscription: str, name: str | None = None) -> str:
    """The budgets of a subscription, or one."""
    base = provider(subscription) + "/budgets"
    return f"{base}/{_seg(name)}" if name else base


def billing_export(subscription: str, day: str) -> str:
    """The subscription's FOCUS billing file of a UTC day (``YYYY-MM-DD``)."""
    return provider(subscription) + f"/billingExports/{_seg(day)}"


def cost_query(subscription: str) -> str:
    """The subscription's cost query."""
    return provider(subscription) + "/costQuery"
