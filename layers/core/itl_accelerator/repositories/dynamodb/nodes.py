"""Nodes in the table (item type ``SparkNode``; key formats: keys.py): the node's envelope and capacity counters,
its fleet-shape count (``FleetShape`` items: admission reads a subscription's few shapes, not its nodes), and its
entry in the placement index GSI5 while it is ``Available`` (sort key ``gpuFree``: best fit first).

A node keeps ``gpuFree``/``memoryGbFree`` beside its totals, changed by every reservation and release in the same
update expression, so the placement index never drifts. Every change is one transaction with its audit event and
the subscription's state check (deletes are allowed in every subscription state).
"""

from __future__ import annotations

import json
from typing import Any

from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.domain.accelerators import model_of_key, vendor_key
from itl_accelerator.domain.records import Booking, Demand, FleetShape, Hold, Node, ResourceKey, breaks_bookings
from itl_accelerator.domain.states import Availability
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import plain, to_json, typed
from itl_accelerator.repositories.dynamodb.listing import Lister, key_of
from itl_accelerator.repositories.dynamodb.table import Table, TransactionFailed
from itl_accelerator.repositories.errors import (
    CapacityInUse,
    EtagMismatch,
    ItemExists,
    ItemMissing,
    SubscriptionNotWritable,
)
from itl_accelerator.repositories.protocols import Page, Scope

TYPE = "sparkNodes"
#: Candidate nodes read per placement attempt (one page of GSI5), and the most pages read for one demand.
CANDIDATE_PAGE = 25
MAX_CANDIDATE_PAGES = 2


def shape_sk(shape: FleetShape) -> str:
    """Sort key of a fleet-shape item (in the subscription's partition): :attr:`FleetShape.sort_key`."""
    return shape.sort_key


#: The prefix of a node item's calendar attributes: one per workload holding devices there (``hold:{holder}``,
#: domain/records.py ``Hold``), set by the reservation's update and removed by the release's — top-level attributes,
#: so a node stored before them takes one without a map to create first.
HOLD_PREFIX = "hold:"


def hold_attribute(holder: str) -> str:
    """The node item's attribute of ``holder``'s hold."""
    return HOLD_PREFIX + holder


def hold_value(hold: Hold) -> str:
    """A hold as stored: ``{gpus},{memoryGb},{until}`` (until: epoch seconds, 0 open-ended), then
    ``,{reservation}`` when its devices come out of a capacity reservation's booking."""
    value = f"{hold.devices},{hold.memory_gb},{hold.until}"
    return f"{value},{hold.reservation}" if hold.reservation else value


def holds_of(item: dict[str, Any]) -> tuple[Hold, ...]:
    """The holds a node item records (an unreadable one is skipped: its devices count as open-ended)."""
    found = []
    for name, value in item.items():
        if not name.startswith(HOLD_PREFIX):
            continue
        parts = str(value).split(",")
        try:
            devices, memory, until = (int(part) for part in parts[:3])
        except ValueError:
            continue
        reservation = parts[3] if len(parts) > 3 else ""
        found.append(Hold(name[len(HOLD_PREFIX) :], devices, memory, until, reservation))
    return tuple(sorted(found, key=lambda h: h.holder))


#: The prefix of a node item's bookings: one per capacity reservation holding devices there in a window
#: (``book:{reservation}``, domain/records.py ``Booking``), set by the booking's transaction and removed by its
#: cancellation; each of those bumps the item's ``calRev``, each reservation and release of devices its ``holdRev``.
BOOK_PREFIX = "book:"
CALENDAR_REVISION = "calRev"
HOLD_REVISION = "holdRev"
#: The booking calendar index's sort key (GSI6, partition ``GSI5PK``): the end of the node's last booking, 0 for none.
BOOKED_UNTIL = "bookedUntil"


def booking_attribute(reservation: str) -> str:
    """The node item's attribute of ``reservation``'s booking."""
    return BOOK_PREFIX + reservation


def booking_value(booking: Booking) -> str:
    """A booking as stored: ``{devices},{memoryGb},{start},{end}`` (epoch seconds)."""
    return f"{booking.devices},{booking.memory_gb},{booking.start},{booking.end}"


def bookings_of(item: dict[str, Any]) -> tuple[Booking, ...]:
    """The bookings a node item records, in start order (an unreadable one is skipped)."""
    found = []
    for name, value in item.items():
        if not name.startswith(BOOK_PREFIX):
            continue
        try:
            devices, memory, start, end = (int(part) for part in str(value).split(","))
        except ValueError:
            continue
        found.append(Booking(name[len(BOOK_PREFIX) :], devices, memory, start, end))
    return tuple(sorted(found, key=lambda b: (b.start, b.reservation)))


def node_from_item(key: ResourceKey, item: dict[str, Any]) -> Node:
    """A node from its item (plain values); an item written before its shape item was recorded (``shapeSk``) is
    counted in its shape's key as it was then (:attr:`FleetShape.legacy_sort_key`)."""
    node = Node(
        key=key,
        document=json.loads(item["doc"]),
        etag=item["etag"],
        device_total=int(item.get("gpuTotal", 0)),
        memory_gb_total=int(item.get("memoryGbTotal", 0)),
        devices_allocated=int(item.get("gpuAllocated", 0)),
        memory_gb_allocated=int(item.get("memoryGbAllocated", 0)),
        child_count=int(item.get("childCount", 0)),
        former_owners=tuple(json.loads(item.get("formerOwners") or "[]")),
        holds=holds_of(item),
        bookings=bookings_of(item),
        calendar_revision=int(item.get(CALENDAR_REVISION, 0)),
        hold_revision=int(item.get(HOLD_REVISION, 0)),
        booked_until=int(item[BOOKED_UNTIL]) if BOOKED_UNTIL in item else None,
    )
    node.counted_shape = str(item.get("shapeSk") or node.shape.legacy_sort_key)
    node.backend_status = json.loads(item["backendStatus"]) if item.get("backendStatus") else None
    return node


def _revision(attribute: str, placeholder: str, value: int) -> str:
    """A condition: ``attribute`` still at ``value`` (0: never written)."""
    return (
        f"{attribute} = {placeholder}"
        if value
        else f"(attribute_not_exists({attribute}) OR {attribute} = {placeholder})"
    )


def _shape_filter(demand: Demand, conditions: list[str], names: dict[str, str], values: dict[str, Any]) -> None:
    """The index filter of what a demand asks of a node's devices and place — its model (the partition is the kind's
    already), vendor and location — added to ``conditions``, ``names`` and ``values``: the placement index's and the
    booking calendar's (both project these attributes)."""
    if model_of_key(demand.gpu_model):
        conditions.append("gpuModelKey = :model")
        values[":model"] = demand.gpu_model
    if demand.vendor:
        # a node item stored before its vendor was written passes, and placement judges it on its document
        conditions.append("(attribute_not_exists(acceleratorVendor) OR acceleratorVendor = :vendor)")
        values[":vendor"] = vendor_key(demand.vendor)
    if demand.location:
        conditions.append("#loc = :loc")
        names["#loc"] = "location"
        values[":loc"] = demand.location


def _available(node: Node) -> int:
    """1 when ``node`` is ``Available`` (it counts in its shape's available nodes), else 0."""
    return int(node.availability == Availability.AVAILABLE)


def job_ref(job: ResourceKey) -> str:
    """How a drained node names the job it is drained for (the job's sort key)."""
    return keys.resource_sk(job)


class DynamoNodeRepository:
    """:class:`~itl_accelerator.repositories.protocols.NodeRepository` over the table."""

    def __init__(self, table: Table):
        self._t = table
        self._lister = Lister(table, TYPE, node_from_item)

    # ----------------------------------------------------------------------------------------------- reads
    def get(self, key: ResourceKey) -> Node | None:
        item = self._t.get_item(keys.resource_pk(key), keys.resource_sk(key))
        return node_from_item(key, item) if item else None

    def page(self, scope: Scope, limit: int, token: str | None) -> Page[Node]:
        return self._lister.page(scope, limit, token)

    def fleet_shapes(self, subscription_id: str) -> list[FleetShape]:
        """Consistent ``Query`` pages of the subscription's shape items (one page for any fleet of a few hundred
        shapes and prices)."""
        items = self._t.query_all(
            KeyConditionExpression="PK = :pk AND begins_with(SK, :shape)",
            ExpressionAttributeValues=typed({":pk": keys.subscription_pk(subscription_id), ":shape": "SHAPE#"}),
            ConsistentRead=True,
        )
        shapes = []
        for item in items:
            if int(item.get("nodes", 0)) > 0:
                shapes.append(
                    FleetShape(
                        str(item.get("gpuModelKey", "")),
                        str(item["location"]),
                        int(item["gpuTotal"]),
                        int(item["memoryGbTotal"]),
                        int(item["nodes"]),
                        terms=BillingTerms.from_pricing(json.loads(item["pricing"])) if item.get("pricing") else None,
                        available_nodes=int(item.get("availableNodes", 0)),
                        resource_group=str(item.get("rgKey", "")),
                        vendor=str(item.get("vendor", "")),
                    )
                )
        return shapes

    def candidates(
        self,
        subscription_id: str,
        demand: Demand,
        *,
        for_job: ResourceKey | None = None,
        pages: int | None = None,
        most_free_first: bool = False,
    ) -> list[Node]:
        """At most :data:`MAX_CANDIDATE_PAGES` pages of GSI5 (a constant number of requests whatever the fleet's
        size), filtered by memory, model, location, drain and — with ``demand.within`` — pricing as far as a filter
        can say it (domain/pricing.py ``roughly_within``: currency, price, minimum; the caller judges the increment).
        A filter applies after a page's ``Limit``: ineligible nodes with less free room still take places in the
        pages read. None at all for an empty ``within``."""
        if demand.within is not None and not demand.within:
            return []
        conditions = ["memoryGbFree >= :m", "(attribute_not_exists(drainingFor) OR drainingFor = :job)"]
        values: dict[str, Any] = {
            ":p": keys.placement_partition(subscription_id, demand.kind),
            ":g": demand.devices,
            ":m": demand.memory_gb,
            ":job": job_ref(for_job) if for_job else "-",
        }
        names: dict[str, str] = {}
        _shape_filter(demand, conditions, names, values)
        if demand.within is not None:
            bounds = []
            for i, bound in enumerate(demand.within):
                bounds.append(f"priceCurrency = :c{i} AND pricePerGpuHour <= :p{i} AND minimumBillable <= :n{i}")
                values.update(
                    {
                        f":c{i}": bound.currency,
                        f":p{i}": bound.price_per_gpu_hour,
                        f":n{i}": bound.minimum_billable_seconds,
                    }
                )
            # AND binds tighter than OR, and DynamoDB refuses parentheses it does not need
            conditions.append(f"({' OR '.join(bounds)})" if len(bounds) > 1 else bounds[0])
        request: dict[str, Any] = {
            "TableName": self._t.name,
            "IndexName": "GSI5",
            "KeyConditionExpression": "GSI5PK = :p AND gpuFree >= :g",
            "FilterExpression": " AND ".join(conditions),
            "ExpressionAttributeValues": typed(values),
            "Limit": CANDIDATE_PAGE,
            "ScanIndexForward": not most_free_first,
        }
        if names:
            request["ExpressionAttributeNames"] = names
        found: list[Node] = []
        for _ in range(pages or MAX_CANDIDATE_PAGES):
            response = self._t.client.query(**request)
            for item in map(plain, response.get("Items", [])):
                found.append(node_from_item(key_of(item, subscription_id, TYPE), item))
            if (found and pages is None) or "LastEvaluatedKey" not in response:
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return found

    def bookable(self, subscription_id: str, demand: Demand, start: int, *, pages: int) -> list[Node]:
        """At most ``pages`` pages of the booking calendar index GSI6 (:data:`CANDIDATE_PAGE` keys each): the
        ``Available`` nodes of the demand's kind no booking holds from ``start`` on (``bookedUntil <= start``), the
        longest free first, filtered by model, vendor and location; then their items (``BatchGetItem``, consistent).
        A constant number of requests whatever the fleet."""
        values: dict[str, Any] = {":p": keys.placement_partition(subscription_id, demand.kind), ":s": start}
        conditions: list[str] = []
        names: dict[str, str] = {}
        _shape_filter(demand, conditions, names, values)
        request: dict[str, Any] = {
            "TableName": self._t.name,
            "IndexName": "GSI6",
            "KeyConditionExpression": f"GSI5PK = :p AND {BOOKED_UNTIL} <= :s",
            "ExpressionAttributeValues": typed(values),
            "Limit": CANDIDATE_PAGE,
        }
        if conditions:
            request["FilterExpression"] = " AND ".join(conditions)
        if names:
            request["ExpressionAttributeNames"] = names
        wanted: list[dict[str, str]] = []
        for _ in range(pages):
            response = self._t.client.query(**request)
            wanted += [{"PK": i["PK"], "SK": i["SK"]} for i in map(plain, response.get("Items", []))]
            if "LastEvaluatedKey" not in response:
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        found = [node_from_item(key_of(item, subscription_id, TYPE), item) for item in self._t.batch_get(wanted)]
        return [n for n in found if n.placeable]

    # ----------------------------------------------------------------------------------------------- writes
    def create(self, node: Node, audit: AuditEvent) -> None:
        item = {
            **self._item(node),
            "gpuAllocated": 0,
            "memoryGbAllocated": 0,
            "gpuFree": node.device_total,
            "memoryGbFree": node.memory_gb_total,
            "childCount": 0,
            BOOKED_UNTIL: 0,
        }
        items = [
            {
                "Put": {
                    "TableName": self._t.name,
                    "Item": typed(item),
                    "ConditionExpression": "attribute_not_exists(PK)",
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            self._t.audit_put(audit),
            self._t.subscription_check(node.key.subscription_id),
            self._shape_count(node.key.subscription_id, node.shape, +1, _available(node)),
        ]
        self._transact(items, creating=True)

    def replace(self, previous: Node, node: Node, audit: AuditEvent) -> None:
        item = self._item(node)
        available = node.placeable
        settable = {k: v for k, v in item.items() if k not in ("PK", "SK")}
        names = {f"#a{i}": k for i, k in enumerate(settable)}
        values: dict[str, Any] = {f":v{i}": v for i, v in enumerate(settable.values())}
        assignments = [f"#a{i} = :v{i}" for i in range(len(settable))]
        condition = "etag = :expected"
        if breaks_bookings(previous, node):  # at the calendar read: a booking landing meanwhile is never left on it
            condition += f" AND {_revision(CALENDAR_REVISION, ':cal', previous.calendar_revision)}"
            values[":cal"] = previous.calendar_revision
        for total, allocated, free, value in (
            ("gpuTotal", "gpuAllocated", "gpuFree", node.device_total),
            ("memoryGbTotal", "memoryGbAllocated", "memoryGbFree", node.memory_gb_total),
        ):
            condition += f" AND (attribute_not_exists({allocated}) OR {allocated} <= :{total})"
            values[f":{total}"] = value
            assignments.append(f"{free} = :{total} - {allocated}")
        if (
            previous.held_identity != node.held_identity
        ):  # work placed there asked for the devices it held: none may hold any
            condition += " AND (attribute_not_exists(gpuAllocated) OR gpuAllocated = :zero)"
            condition += " AND (attribute_not_exists(memoryGbAllocated) OR memoryGbAllocated = :zero)"
            values[":zero"] = 0
        assignments.append(f"{BOOKED_UNTIL} = if_not_exists({BOOKED_UNTIL}, :zeroBooked)")  # into the calendar index
        values[":zeroBooked"] = 0
        expression = "SET " + ", ".join(assignments)
        removed = ([] if available else ["GSI5PK"]) + ([] if node.backend.is_slurm else ["GSI1PK", "GSI1SK"])
        if removed:
            names.update({f"#u{i}": attribute for i, attribute in enumerate(removed)})
            expression += " REMOVE " + ", ".join(f"#u{i}" for i in range(len(removed)))
        items = [
            {
                "Update": {
                    "TableName": self._t.name,
                    "Key": typed(keys.item_key(node.key)),
                    "UpdateExpression": expression,
                    "ConditionExpression": f"attribute_exists(PK) AND {condition}",
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": typed({**values, ":expected": previous.etag}),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            self._t.audit_put(audit),
            self._t.subscription_check(node.key.subscription_id),
        ]
        sub = node.key.subscription_id
        if previous.counted_shape_key != shape_sk(node.shape):  # its hardware, place or pricing changed
            items.append(self._shape_count(sub, node.shape, +1, _available(node)))
            items.append(
                self._shape_count(sub, previous.shape, -1, -_available(previous), sk=previous.counted_shape_key)
            )
        elif _available(node) != _available(previous):
            items.append(self._shape_count(sub, node.shape, 0, _available(node) - _available(previous)))
        self._transact(
            items,
            expected_etag=previous.etag,
            expected_calendar=previous.calendar_revision if breaks_bookings(previous, node) else None,
        )

    def delete(self, node: Node, audit: AuditEvent) -> None:
        idle = " AND ".join(
            f"(attribute_not_exists({a}) OR {a} = :zero)" for a in ("gpuAllocated", "memoryGbAllocated", "childCount")
        )
        self._transact(
            [
                {
                    "Delete": {
                        "TableName": self._t.name,
                        "Key": typed(keys.item_key(node.key)),
                        # at the calendar revision read: a booking written since is never left on a deleted node
                        "ConditionExpression": f"attribute_exists(PK) AND etag = :expected AND {idle} AND "
                        + (
                            f"{CALENDAR_REVISION} = :cal"
                            if node.calendar_revision
                            else f"(attribute_not_exists({CALENDAR_REVISION}) OR {CALENDAR_REVISION} = :cal)"
                        ),
                        "ExpressionAttributeValues": typed(
                            {":expected": node.etag, ":zero": 0, ":cal": node.calendar_revision}
                        ),
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                self._t.audit_put(audit),
                self._shape_count(
                    node.key.subscription_id, node.shape, -1, -_available(node), sk=node.counted_shape_key
                ),
            ],
            expected_etag=node.etag,
            expected_calendar=node.calendar_revision,
            subscription_checked=False,
        )

    def on_cluster(self, cluster: str, node_name: str | None = None) -> list[Node]:
        """Every node (of any subscription) of Slurm cluster ``cluster`` — or only those that name Slurm node
        ``node_name`` (any case): ``Query`` pages of GSI1 (as many as the cluster's nodes need; never the fleet)."""
        condition, values = "GSI1PK = :p", {":p": keys.slurm_nodes_partition(cluster)}
        if node_name is not None:
            condition, values[":n"] = f"{condition} AND begins_with(GSI1SK, :n)", f"{node_name.lower()}#"
        items = self._t.query_all(
            IndexName="GSI1", KeyConditionExpression=condition, ExpressionAttributeValues=typed(values)
        )
        found = []
        for item in items:
            sub = str(item["id"]).split("/")[2]  # the subscription in its casing (the key's is lower case)
            found.append(node_from_item(key_of(item, sub, TYPE), item))
        return found

    def set_backend_status(self, node: Node, status: dict[str, Any]) -> bool:
        """Record how its platform reports ``node`` (bookkeeping: no new etag, no audit), and take it out of the
        placement index when the platform takes no work on it (back in when it does again and the node is
        ``Available``) — conditioned on the node being as read (its etag). False when it changed meanwhile."""
        placeable = node.availability == Availability.AVAILABLE and bool(status.get("placeable", True))
        update: dict[str, Any] = {
            "TableName": self._t.name,
            "Key": typed(keys.item_key(node.key)),
            "ConditionExpression": "attribute_exists(PK) AND etag = :etag",
            "ExpressionAttributeValues": typed({":etag": node.etag, ":s": to_json(status)}),
        }
        if placeable:
            update["UpdateExpression"] = "SET backendStatus = :s, GSI5PK = :p"
            update["ExpressionAttributeValues"] = typed(
                {
                    ":etag": node.etag,
                    ":s": to_json(status),
                    ":p": keys.placement_partition(node.key.subscription_id, node.kind),
                }
            )
        else:
            update["UpdateExpression"] = "SET backendStatus = :s REMOVE GSI5PK"
        try:
            self._t.client.update_item(**update)
        except self._t.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def set_draining(self, node: ResourceKey, for_job: ResourceKey | None, *, unless_held: bool = False) -> bool:
        update: dict[str, Any] = {
            "TableName": self._t.name,
            "Key": typed(keys.item_key(node)),
            "ConditionExpression": "attribute_exists(PK)",
        }
        if for_job:
            update["UpdateExpression"] = "SET drainingFor = :job"
            update["ExpressionAttributeValues"] = typed({":job": job_ref(for_job)})
            if unless_held:
                update["ConditionExpression"] += " AND (attribute_not_exists(drainingFor) OR drainingFor = :job)"
        else:
            update["UpdateExpression"] = "REMOVE drainingFor"
        try:
            self._t.client.update_item(**update)
        except self._t.client.exceptions.ConditionalCheckFailedException:
            return False  # the node is gone (nothing to drain), or held for another job
        return True

    # ----------------------------------------------------------------------------------------------- items
    @staticmethod
    def _item(node: Node) -> dict[str, Any]:
        """The written attributes of a node: its envelope, totals, the attributes placement filters on and — while
        it is ``Available`` — its placement index entry; its former owners."""
        key = node.key
        shape = node.shape
        available = node.placeable
        item = {
            "PK": keys.resource_pk(key),
            "SK": keys.resource_sk(key),
            "entityType": TYPE,
            "resourceGroup": key.resource_group,
            "rgKey": key.resource_group.lower(),
            "names": json.dumps(list(key.names)),
            "id": node.arm_id,
            "etag": node.etag,
            "doc": to_json(node.document),
            "owner": node.owner,
            "location": shape.location,
            "availability": str(node.availability),
            "gpuModelKey": shape.gpu_model,
            # the vendor, for the placement index's filter (a job's vendor); the shape item it is counted in
            "acceleratorVendor": vendor_key(node.accelerator.vendor),
            "shapeSk": shape_sk(shape),
            "formerOwners": json.dumps(list(node.former_owners)),
            "gpuTotal": node.device_total,
            "memoryGbTotal": node.memory_gb_total,
            # the pricing, for the placement index's filter by a job's price ceiling (domain/pricing.py)
            "priceCurrency": node.terms.currency,
            "pricePerGpuHour": node.terms.price_per_gpu_hour,
            "billingIncrement": node.terms.billing_increment_seconds,
            "minimumBillable": node.terms.minimum_billable_seconds,
        }
        if available:
            item["GSI5PK"] = keys.placement_partition(key.subscription_id, node.kind)
        backend = node.backend
        if backend.is_slurm:  # found by the node health sweep of its cluster
            item["GSI1PK"] = keys.slurm_nodes_partition(backend.cluster)
            item["GSI1SK"] = f"{backend.node_name.lower()}#{keys.resource_pk(key)}#{keys.resource_sk(key)}"
        return item

    def _shape_count(
        self, subscription_id: str, shape: FleetShape, delta: int, available: int, *, sk: str | None = None
    ) -> dict[str, Any]:
        """Transaction item: count a node in (``+1``) or out of (``-1``) its fleet shape, and ``available`` in or out
        of the shape's ``Available`` nodes. ``sk``: the shape item the node is counted in, when another than its shape's
        own (:attr:`Node.counted_shape_key`: one stored before vendors were counted, which keeps no vendor)."""
        sk = sk or shape_sk(shape)
        return {
            "Update": {
                "TableName": self._t.name,
                "Key": typed({"PK": keys.subscription_pk(subscription_id), "SK": sk}),
                "UpdateExpression": "ADD nodes :d, availableNodes :a SET entityType = :t, gpuModelKey = :model, "
                "#loc = :loc, gpuTotal = :g, memoryGbTotal = :m, pricing = :pricing, rgKey = :rg, vendor = :v",
                "ExpressionAttributeNames": {"#loc": "location"},
                "ExpressionAttributeValues": typed(
                    {
                        ":d": delta,
                        ":a": available,
                        ":t": "FleetShape",
                        ":model": shape.gpu_model,
                        ":loc": shape.location,
                        ":g": shape.device_total,
                        ":m": shape.memory_gb_total,
                        ":pricing": to_json(shape.terms.as_stored()) if shape.terms else "",
                        ":rg": shape.resource_group,
                        ":v": shape.vendor if sk == shape_sk(shape) else "",
                    }
                ),
            }
        }

    def _transact(
        self,
        items: list[dict[str, Any]],
        *,
        expected_etag: str | None = None,
        creating: bool = False,
        subscription_checked: bool = True,
        expected_calendar: int | None = None,
    ) -> None:
        """Item 0 is the node, item 1 its audit event, item 2 (when ``subscription_checked``) the subscription
        check. Failures become typed errors by position (the node at another etag, or — ``expected_calendar`` — at
        another booking calendar revision: ``EtagMismatch``)."""
        try:
            self._t.transact(items)
        except TransactionFailed as exc:
            if subscription_checked and 2 in exc.failed:
                raise SubscriptionNotWritable(str(exc.failed[2].get("state", "Unregistered"))) from exc
            if 0 not in exc.failed:
                raise
            if creating:
                raise ItemExists() from exc
            old = exc.failed[0]
            if not old:
                raise ItemMissing() from exc
            if expected_etag is not None and old.get("etag") != expected_etag:
                raise EtagMismatch() from exc
            if expected_calendar is not None and int(old.get(CALENDAR_REVISION, 0)) != expected_calendar:
                raise EtagMismatch() from exc
            raise CapacityInUse(
                int(old.get("gpuAllocated", 0)), int(old.get("memoryGbAllocated", 0)), int(old.get("childCount", 0))
            ) from exc
