"""What a capacity reservation is billed as (issue 44; docs/BILLING.md, "Capacity reservations"): one meter per node
it books, from its window's start to its end, at the price locked when it was booked — every hour billed, used or
not. Each meter is a :class:`~itl_accelerator.billing.descriptor.BillingDescriptor` of the reservation (its ARM id,
name, type, resource group, tags and who booked it) on its node (the node's supplier, region, SKU, kind and model),
holding the devices it books there, with ``capacity_reservation_id`` its own ARM id (FOCUS CapacityReservationId).
The usage sync, roll-ups, cost query, budgets, supplier earnings and the daily FOCUS export then count it as they
count any allocation: exactly once."""

from __future__ import annotations

from collections.abc import Sequence

from itl_accelerator.domain.records import Node
from itl_accelerator.domain.reservations import CapacityReservation
from itl_accelerator.domain.usage import Meter
from itl_accelerator.resources import RESERVATIONS

#: The provider's service a reservation's charges are billed under (billing/focus.py ``SERVICES``).
RESERVATIONS_SERVICE = "reservations"


def reservation_meters(reservation: CapacityReservation, nodes: Sequence[Node]) -> list[Meter]:
    """The meters of ``reservation`` booked on ``nodes`` (as read, in :attr:`CapacityReservation.nodes`' order)."""
    document = reservation.document
    return [
        Meter(
            allocation_id=allocation_id,
            terms=reservation.terms,
            start=reservation.start,
            end=reservation.end,
            subscription_id=reservation.key.subscription_id,
            resource_group=reservation.key.resource_group,
            resource_id=reservation.arm_id,
            resource_name=str(document["name"]),
            resource_type=RESERVATIONS.type_name,
            service=RESERVATIONS_SERVICE,
            node_resource_group=node.key.resource_group,
            node_name=node.name,
            node_id=node.arm_id,
            supplier=node.owner or "unknown",
            region=node.location or "unknown",
            sku=node.sku_name or "unknown",
            gpus=reservation.devices,
            tags=dict(document.get("tags") or {}),
            resource_created_at=str((document.get("systemData") or {}).get("createdAt", "")),
            node_created_at=node.created_at,
            submitted_by=reservation.booked_by,
            accelerator_kind=node.kind,
            accelerator_model=node.accelerator.model or "",
            capacity_reservation_id=reservation.arm_id,
        )
        for allocation_id, node in zip(reservation.meter_ids, nodes, strict=True)
    ]
