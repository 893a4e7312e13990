"""Capacity reservations in the table (item type ``CapacityReservation``: ``SUB#{sub}`` / ``CAPRES#{rg}#{name}``;
domain/reservations.py), each booked on its nodes' items (``book:{reservation}``, repositories/dynamodb/nodes.py).

**Booking** is one ``TransactWriteItems``: the reservation (its name free), its audit event, the subscription's
state check, on each node ``SET book:{ref}`` with ``ADD calRev 1`` — conditioned on the node existing, being
``Available``, at the etag read (its price is the one locked) and at the ``calRev`` and ``holdRev`` read (no booking,
cancellation, placement or release landed there since the service decided) — and one meter per node, starting at the
window's start and ending at its end (billed whole). So of concurrent bookings for the last devices exactly one
writes; the others fail on the node's revision and decide again on what they read then.

**Cancelling** deletes the reservation at its etag, removes its booking from each of its nodes still there (one
``GetItem`` each first: a node deleted since has nothing to remove), bumps their ``calRev``, and bills it up to when
it is told: its meters deleted when that is before its window (nothing billed), ended there when within it, kept as
booked otherwise.
"""

from __future__ import annotations

import json
from typing import Any

from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.domain.records import Node, ResourceKey
from itl_accelerator.domain.reservations import CapacityReservation, booked_until
from itl_accelerator.domain.states import Availability
from itl_accelerator.domain.usage import Meter
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import to_json, typed
from itl_accelerator.repositories.dynamodb.listing import Lister
from itl_accelerator.repositories.dynamodb.meters import meter_start_item
from itl_accelerator.repositories.dynamodb.nodes import (
    BOOKED_UNTIL,
    CALENDAR_REVISION,
    HOLD_REVISION,
    booking_attribute,
    booking_value,
)
from itl_accelerator.repositories.dynamodb.table import Table, TransactionFailed
from itl_accelerator.repositories.errors import EtagMismatch, ItemExists, NodeChanged, SubscriptionNotWritable
from itl_accelerator.repositories.protocols import Page, Scope
from itl_accelerator.resources import RESERVATIONS

TYPE = RESERVATIONS.segment


def _spec(r: CapacityReservation) -> dict[str, Any]:
    return {
        "kind": r.kind,
        "model": r.model,
        "location": r.location,
        "devices": r.devices,
        "memoryGb": r.memory_gb,
        "start": r.start,
        "end": r.end,
        "nodes": [[n.resource_group, n.name] for n in r.nodes],
        "terms": r.terms.as_stored(),
        "bookedBy": r.booked_by,
        "allocationId": r.allocation_id,
        "suppliers": list(r.suppliers),
    }


def reservation_from_item(key: ResourceKey, item: dict[str, Any]) -> CapacityReservation:
    """A reservation from its item (plain values)."""
    spec = json.loads(item["spec"])
    return CapacityReservation(
        key=key,
        document=json.loads(item["doc"]),
        etag=str(item["etag"]),
        kind=spec["kind"],
        model=spec["model"],
        location=spec["location"],
        devices=int(spec["devices"]),
        memory_gb=int(spec["memoryGb"]),
        start=int(spec["start"]),
        end=int(spec["end"]),
        nodes=tuple(ResourceKey(key.subscription_id, rg, "sparkNodes", (name,)) for rg, name in spec["nodes"]),
        terms=BillingTerms.from_pricing(spec["terms"]),
        booked_by=spec["bookedBy"],
        allocation_id=spec.get("allocationId", ""),
        suppliers=tuple(spec.get("suppliers") or ()),
    )


def _revision_condition(attribute: str, placeholder: str, value: int) -> str:
    """``attribute`` still at ``value`` (0: never written)."""
    if value:
        return f"{attribute} = {placeholder}"
    return f"(attribute_not_exists({attribute}) OR {attribute} = {placeholder})"


class DynamoCapacityReservationRepository:
    """:class:`~itl_accelerator.repositories.protocols.CapacityReservationRepository` over the table."""

    def __init__(self, table: Table):
        self._t = table
        self._lister = Lister(table, TYPE, reservation_from_item)

    def get(self, key: ResourceKey) -> CapacityReservation | None:
        item = self._t.get_item(keys.resource_pk(key), keys.resource_sk(key))
        return reservation_from_item(key, item) if item else None

    def page(self, scope: Scope, limit: int, token: str | None) -> Page[CapacityReservation]:
        return self._lister.page(scope, limit, token)

    def book(
        self,
        reservation: CapacityReservation,
        nodes: list[Node],
        meters: list[Meter],
        audit: AuditEvent,
        *,
        expired_before: int = 0,
    ) -> None:
        key = reservation.key
        item = {
            **keys.item_key(key),
            "entityType": TYPE,
            "resourceGroup": key.resource_group,
            "rgKey": key.resource_group.lower(),
            "names": json.dumps(list(key.names)),
            "id": reservation.arm_id,
            "etag": reservation.etag,
            "doc": to_json(reservation.document),
            "spec": to_json(_spec(reservation)),
        }
        items: list[dict[str, Any]] = [
            {
                "Put": {
                    "TableName": self._t.name,
                    "Item": typed(item),
                    "ConditionExpression": "attribute_not_exists(PK)",
                }
            },
            self._t.audit_put(audit),
            self._t.subscription_check(key.subscription_id),
        ]
        items += [self._booking(reservation, node, expired_before) for node in nodes]
        items += [meter_start_item(self._t.name, meter) for meter in meters]
        try:
            self._t.transact(items)
        except TransactionFailed as exc:
            if 0 in exc.failed:
                raise ItemExists() from exc
            if 2 in exc.failed:
                raise SubscriptionNotWritable(str(exc.failed[2].get("state", "Unregistered"))) from exc
            raise NodeChanged() from exc

    def _booking(self, reservation: CapacityReservation, node: Node, expired_before: int) -> dict[str, Any]:
        expired = [b.reservation for b in node.bookings if b.end < expired_before and b.reservation != reservation.ref]
        names = {f"#x{i}": booking_attribute(ref) for i, ref in enumerate(expired)}
        remove = f" REMOVE {', '.join(names)}" if names else ""
        until = booked_until(node, reservation, expired_before)
        return {
            "Update": {
                "TableName": self._t.name,
                "Key": typed(keys.item_key(node.key)),
                "UpdateExpression": f"SET #book = :book, {BOOKED_UNTIL} = :until ADD {CALENDAR_REVISION} :one{remove}",
                "ConditionExpression": " AND ".join(
                    (
                        "attribute_exists(PK) AND availability = :available AND etag = :etag",
                        _revision_condition(CALENDAR_REVISION, ":cal", node.calendar_revision),
                        _revision_condition(HOLD_REVISION, ":held", node.hold_revision),
                    )
                ),
                "ExpressionAttributeNames": {"#book": booking_attribute(reservation.ref), **names},
                "ExpressionAttributeValues": typed(
                    {
                        ":book": booking_value(reservation.booking),
                        ":until": until,
                        ":one": 1,
                        ":available": str(Availability.AVAILABLE),
                        ":etag": node.etag,
                        ":cal": node.calendar_revision,
                        ":held": node.hold_revision,
                    }
                ),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def cancel(self, reservation: CapacityReservation, audit: AuditEvent, *, bill_until: int | None) -> None:
        key = reservation.key
        items: list[dict[str, Any]] = [
            {
                "Delete": {
                    "TableName": self._t.name,
                    "Key": typed(keys.item_key(key)),
                    "ConditionExpression": "etag = :etag",
                    "ExpressionAttributeValues": typed({":etag": reservation.etag}),
                }
            },
            self._t.audit_put(audit),
        ]
        for node in reservation.nodes:
            if self._t.get_item(keys.resource_pk(node), keys.resource_sk(node)) is None:
                continue  # deleted since (forced): nothing of the booking is left there
            items.append(
                {
                    "Update": {
                        "TableName": self._t.name,
                        "Key": typed(keys.item_key(node)),
                        "UpdateExpression": f"REMOVE #book ADD {CALENDAR_REVISION} :one",
                        "ConditionExpression": "attribute_exists(PK)",
                        "ExpressionAttributeNames": {"#book": booking_attribute(reservation.ref)},
                        "ExpressionAttributeValues": typed({":one": 1}),
                    }
                }
            )
        if bill_until is not None and bill_until < reservation.end:
            items += self._unbill(reservation, bill_until)
        try:
            self._t.transact(items)
        except TransactionFailed as exc:
            raise EtagMismatch() from exc

    def _unbill(self, reservation: CapacityReservation, bill_until: int) -> list[dict[str, Any]]:
        """Its meters deleted (``bill_until`` at or before its start: nothing billed) or ended at ``bill_until``."""
        pk = keys.subscription_pk(reservation.key.subscription_id)
        meters = [typed({"PK": pk, "SK": keys.meter_sk(meter_id)}) for meter_id in reservation.meter_ids]
        if bill_until <= reservation.start:
            return [{"Delete": {"TableName": self._t.name, "Key": key}} for key in meters]
        return [
            {
                "Update": {
                    "TableName": self._t.name,
                    "Key": key,
                    "UpdateExpression": "SET #end = :end",
                    "ConditionExpression": "attribute_exists(PK)",
                    "ExpressionAttributeNames": {"#end": "end"},
                    "ExpressionAttributeValues": typed({":end": bill_until}),
                }
            }
            for key in meters
        ]
