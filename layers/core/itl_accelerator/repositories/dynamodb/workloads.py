"""What the instance and job repositories share in the table: the workload items, their transitions and the items
that move with them — operations, the capacity reserved on or given back to a node, meters — each change one
transaction whose failures come back as typed errors.

A transition is written as the difference between the workload as read (``before``) and as it should be
(``after``): only the attributes that changed are set or removed, under the record's :class:`Expect` — so
bookkeeping written meanwhile by another step (a lease, a task token) is never overwritten with what was read.

Capacity is never over-committed: a reservation is a conditional ``ADD`` on the node item
(``allocated <= total - requested`` against the totals and etag read, ``availability = Available``, not drained
for another job); a release is written by the transition that clears the workload's ``capacityReserved``, so it
happens exactly once.

Every workload a workflow owns carries a lease in the sparse index GSI2 (``GSI2PK = LEASE#{shard}`` or, for a
running job's next check, ``TRACK#{shard}``; ``GSI2SK = {leaseUntil}#{PK}#{SK}``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Generic, TypeVar

from itl_accelerator.domain.quotas import QuotaScope
from itl_accelerator.domain.records import Lease, Node, Operation, Release, Reservation, ResourceKey, Workload
from itl_accelerator.domain.states import FINAL_OPERATION_STATUSES, Availability, LeaseKind
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import plain, to_json, typed
from itl_accelerator.repositories.dynamodb.meters import meter_end_item, meter_start_item
from itl_accelerator.repositories.dynamodb.nodes import hold_attribute, hold_value, job_ref, node_from_item
from itl_accelerator.repositories.dynamodb.quotas import quota_charge_items, quota_exceeded, quota_release_items
from itl_accelerator.repositories.dynamodb.table import Table, TransactionFailed
from itl_accelerator.repositories.errors import (
    CapacityShortfall,
    NodeChanged,
    NodeMissing,
    NodeUnavailable,
    SubscriptionNotWritable,
    WorkloadChanged,
)
from itl_accelerator.repositories.protocols import Effects, Expect

#: Operation status items are kept at least 24 h (ARM_CONTRACT.md line 14); here 7 days, then TTL removes them.
OPERATION_RETENTION_SECONDS = 7 * 24 * 3600
#: Partitions of the lease index: the reconciler queries each, so no single partition takes every lease write.
LEASE_SHARDS = keys.LEASE_SHARDS

#: Set on an instance or job item by a bookkeeping write alone (a lease, a task token, the next check: ``note``),
#: removed by every other write. The state-events consumer's stream filter (template.yaml ``StateEventsFunction``)
#: passes only records without it, so lease renewals — some 1,400 a day per live instance — never invoke it.
BOOKKEEPING = "bookkeeping"

W = TypeVar("W", bound=Workload)

#: Item attributes of the workload envelope and its key (never written by a transition).
IDENTITY = ("PK", "SK", "entityType", "resourceGroup", "rgKey", "names", "id")


def lease_partition(pk: str, sk: str, kind: LeaseKind) -> str:
    """The lease-index partition of an item (stable: a hash of its key)."""
    return f"{kind}#{keys.lease_shard(pk, sk)}"


def lease_attributes(key: ResourceKey, lease: Lease | None) -> dict[str, Any]:
    """``leaseUntil`` and the lease-index keys of a workload (None values when it has no lease)."""
    if lease is None:
        return {"leaseUntil": None, "GSI2PK": None, "GSI2SK": None}
    pk, sk = keys.resource_pk(key), keys.resource_sk(key)
    until = int(lease.until)
    return {
        "leaseUntil": until,
        "GSI2PK": lease_partition(pk, sk, lease.kind),
        "GSI2SK": keys.lease_sort_key(pk, sk, until),
    }


def lease_from_item(item: dict[str, Any]) -> Lease | None:
    if item.get("leaseUntil") is None:
        return None
    kind = LeaseKind(str(item.get("GSI2PK", "LEASE#0")).split("#", 1)[0])
    return Lease(kind, float(item["leaseUntil"]))


def common_attributes(workload: Workload) -> dict[str, Any]:
    """The attributes every workload item has (None: absent)."""
    key = workload.key
    return {
        "PK": keys.resource_pk(key),
        "SK": keys.resource_sk(key),
        "entityType": key.type_segment,
        "resourceGroup": key.resource_group,
        "rgKey": key.resource_group.lower(),
        "names": json.dumps(list(key.names)),
        "id": workload.document["id"],
        "etag": workload.etag,
        "doc": to_json(workload.document),
        "provisioningState": str(workload.state),
        "operationId": workload.operation_id or None,
        "specHash": workload.spec_hash,
        "gpus": workload.devices,
        "memoryGb": workload.memory_gb,
        "capacityReserved": workload.capacity_reserved,
        "cancelRequested": workload.cancel_requested,
        "dgxId": workload.dgx_id or None,
        "location": workload.location,
        "nodeResourceGroup": workload.node.resource_group if workload.node else None,
        "nodeName": workload.node.name if workload.node else None,
        "nodeOwner": workload.node_owner or None,
        "billingTerms": to_json(workload.billing_terms.as_stored()) if workload.billing_terms else None,
        "meterId": workload.meter_id or None,
        "quotaScope": workload.quota.encode() if workload.quota else None,
        **lease_attributes(key, workload.lease),
    }


def common_fields(key: ResourceKey, item: dict[str, Any]) -> dict[str, Any]:
    """The :class:`Workload` fields of an item (keyword arguments)."""
    from itl_accelerator.billing.metering import BillingTerms
    from itl_accelerator.domain.states import ProvisioningState

    node = None
    if item.get("nodeName"):
        node = ResourceKey(key.subscription_id, item["nodeResourceGroup"], "sparkNodes", (item["nodeName"],))
    return {
        "key": key,
        "document": json.loads(item["doc"]),
        "etag": item["etag"],
        "state": ProvisioningState(item["provisioningState"]),
        "operation_id": item.get("operationId"),
        "spec_hash": item.get("specHash", ""),
        "devices": int(item.get("gpus", 0)),
        "memory_gb": int(item.get("memoryGb", 0)),
        "capacity_reserved": bool(item.get("capacityReserved", False)),
        "cancel_requested": bool(item.get("cancelRequested", False)),
        "dgx_id": item.get("dgxId"),
        "location": item.get("location", ""),
        "node": node,
        "node_owner": item.get("nodeOwner"),
        "billing_terms": BillingTerms.from_pricing(json.loads(item["billingTerms"]))
        if item.get("billingTerms")
        else None,
        "meter_id": item.get("meterId"),
        "lease": lease_from_item(item),
        "quota": QuotaScope.decode(item["quotaScope"]) if item.get("quotaScope") else None,
    }


def expectation(expect: Expect) -> tuple[str, dict[str, str], dict[str, Any]]:
    """Condition expression, names and values of ``expect`` (always: the item exists)."""
    wanted: dict[str, Any] = {}
    if expect.etag is not None:
        wanted["etag"] = expect.etag
    if expect.state is not None:
        wanted["provisioningState"] = tuple(str(s) for s in expect.state)
    if expect.status is not None:
        wanted["status"] = tuple(str(s) for s in expect.status)
    if expect.operation_id is not None:
        wanted["operationId"] = expect.operation_id
    if expect.delete_operation_id is not None:
        wanted["deleteOperationId"] = expect.delete_operation_id
    if expect.dgx_id is not None:
        wanted["dgxId"] = expect.dgx_id
    if expect.capacity_reserved is not None:
        wanted["capacityReserved"] = expect.capacity_reserved
    if expect.cancel_requested is not None:
        wanted["cancelRequested"] = expect.cancel_requested
    if expect.task_token is not None:
        wanted["taskToken"] = expect.task_token
    parts, names, values = ["attribute_exists(PK)"], {}, {}
    for i, (attr, value) in enumerate(wanted.items()):
        names[f"#e{i}"] = attr
        if isinstance(value, tuple):
            options = []
            for j, option in enumerate(value):
                values[f":e{i}_{j}"] = option
                options.append(f":e{i}_{j}")
            parts.append(f"#e{i} IN ({', '.join(options)})")
        else:
            values[f":e{i}"] = value
            parts.append(f"#e{i} = :e{i}")
    return " AND ".join(parts), names, values


class WorkloadTable(Generic[W]):
    """The shared part of the instance and job repositories (module docstring), which they are: its methods are
    theirs (``get``, ``update``, ``remove``, ``note`` as repositories/protocols.py has them). ``attributes(workload)``
    maps a record to its item attributes (None: absent); ``decode(key, item)`` maps back."""

    def __init__(
        self,
        table: Table,
        attributes: Callable[[W], dict[str, Any]],
        decode: Callable[[ResourceKey, dict[str, Any]], W],
    ):
        self._t = table
        self._attributes = attributes
        self._decode = decode

    # ----------------------------------------------------------------------------------------------- reads
    def get(self, key: ResourceKey) -> W | None:
        item = self._t.get_item(keys.resource_pk(key), keys.resource_sk(key))
        return self._decode(key, item) if item else None

    def get_with(self, key: ResourceKey, node: ResourceKey) -> tuple[W | None, Node | None]:
        """A workload and a node in one ``BatchGetItem`` (consistent reads)."""
        wanted = [keys.item_key(key), keys.item_key(node)]
        response = self._t.client.batch_get_item(
            RequestItems={self._t.name: {"Keys": [typed(k) for k in wanted], "ConsistentRead": True}}
        )
        if response.get("UnprocessedKeys", {}).get(self._t.name, {}).get("Keys"):  # rare (throttling): point reads
            node_item = self._t.get_item(keys.resource_pk(node), keys.resource_sk(node))
            return self.get(key), node_from_item(node, node_item) if node_item else None
        found = {(i["PK"]["S"], i["SK"]["S"]): plain(i) for i in response.get("Responses", {}).get(self._t.name, [])}
        workload_item = found.get((keys.resource_pk(key), keys.resource_sk(key)))
        node_item = found.get((keys.resource_pk(node), keys.resource_sk(node)))
        return (
            self._decode(key, workload_item) if workload_item else None,
            node_from_item(node, node_item) if node_item else None,
        )

    # ----------------------------------------------------------------------------------------------- writes
    def put_new(
        self,
        workload: W,
        operation: Operation,
        audit: AuditEvent,
        *,
        reservation: Reservation | None = None,
        replacing_etag: str | None = None,
    ) -> None:
        """A new workload (or one replaced while still at ``replacing_etag``), its operation, audit event, the
        subscription's state check and its reservation (the workload records the quotas it counts in) — one
        transaction."""
        if reservation is not None:
            workload = replace(workload, quota=reservation.quota)
        item = {k: v for k, v in self._attributes(workload).items() if v is not None}
        put: dict[str, Any] = {
            "TableName": self._t.name,
            "Item": typed(item),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if replacing_etag is None:
            put["ConditionExpression"] = "attribute_not_exists(PK)"
        else:
            put["ConditionExpression"] = "etag = :expected"
            put["ExpressionAttributeValues"] = typed({":expected": replacing_etag})
        items = [
            {"Put": put},
            self._operation_put(operation, workload.key),
            self._t.audit_put(audit),
            self._t.subscription_check(workload.key.subscription_id),
        ]
        quotas: tuple[int, ...] = ()
        if reservation is not None:
            items.append(self._node_reserve(reservation))
            quotas = self._add_quota_charge(items, workload.key.subscription_id, reservation)
        try:
            self._t.transact(items)
        except TransactionFailed as exc:
            self._raise_typed(
                exc,
                subscription=3,
                nodes=(4,) if reservation else (),
                quotas=quotas,
                reservations=(reservation,) if reservation else (),
            )

    def update(
        self, before: W, after: W, audit: AuditEvent | None, *, expect: Expect, effects: Effects = Effects()
    ) -> None:
        """The transition ``before`` → ``after`` (only the attributes that differ), with its audit event and
        ``effects`` — one transaction (module docstring). A reservation records the quotas it counts in on the
        workload."""
        if effects.reservation is not None:
            after = replace(after, quota=effects.reservation.quota)
        items: list[dict[str, Any]] = [self._diff_update(before, after, expect, bookkeeping=False)]
        if audit is not None:
            items.append(self._t.audit_put(audit))
        positions = self._add_effects(items, after.key, effects)
        try:
            self._t.transact(items)
        except TransactionFailed as exc:
            nodes = tuple(positions[f"node{i}"] for i in range(len(effects.reservations)))
            self._raise_typed(
                exc,
                operation=positions.get("operation"),
                nodes=nodes,
                quotas=tuple(range(positions["quotas"], positions["quotas_end"])),
                reservations=effects.reservations,
            )

    def remove(self, workload: W, audit: AuditEvent, *, expect: Expect, effects: Effects = Effects()) -> None:
        """Delete the workload item if ``expect`` holds, with its audit event and ``effects``."""
        condition, names, values = expectation(expect)
        delete: dict[str, Any] = {
            "TableName": self._t.name,
            "Key": typed(keys.item_key(workload.key)),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if values:
            delete["ExpressionAttributeValues"] = typed(values)
        items: list[dict[str, Any]] = [{"Delete": delete}, self._t.audit_put(audit)]
        positions = self._add_effects(items, workload.key, effects)
        try:
            self._t.transact(items)
        except TransactionFailed as exc:
            self._raise_typed(exc, operation=positions.get("operation"))

    def note(self, before: W, after: W, *, expect: Expect) -> bool:
        """Bookkeeping written on its own (no audit): ``False`` when ``expect`` no longer holds. The item is marked
        ``bookkeeping`` (:data:`BOOKKEEPING`), so the state-events consumer's stream filter never wakes for it."""
        item = self._diff_update(before, after, expect, bookkeeping=True)
        if "Update" not in item:  # nothing to write: whether the expectation still holds is the answer
            try:
                self._t.transact([item])
            except TransactionFailed:
                return False
            return True
        update = item["Update"]
        update.pop("ReturnValuesOnConditionCheckFailure")
        try:
            self._t.client.update_item(**update)
        except self._t.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    # ----------------------------------------------------------------------------------------------- items
    def _diff_update(self, before: W, after: W, expect: Expect, *, bookkeeping: bool) -> dict[str, Any]:
        """The update of what differs between ``before`` and ``after`` under ``expect`` (a ConditionCheck alone
        when nothing does); a write that changes something sets :data:`BOOKKEEPING` when ``bookkeeping``, else
        removes it (every state change reaches the stream's consumers)."""
        old, new = self._attributes(before), self._attributes(after)
        changed = {k: v for k, v in new.items() if k not in IDENTITY and old.get(k) != v}
        if changed:
            changed[BOOKKEEPING] = True if bookkeeping else None
        sets = {k: v for k, v in changed.items() if v is not None}
        removes = [k for k, v in changed.items() if v is None]
        condition, names, condition_values = expectation(expect)
        names.update({f"#s{i}": k for i, k in enumerate(sets)})
        names.update({f"#r{i}": k for i, k in enumerate(removes)})
        expression = "SET " + ", ".join(f"#s{i} = :s{i}" for i in range(len(sets))) if sets else ""
        if removes:
            expression += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(removes)))
        update: dict[str, Any] = {
            "TableName": self._t.name,
            "Key": typed(keys.item_key(after.key)),
            "UpdateExpression": expression.strip(),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        all_values = {**{f":s{i}": v for i, v in enumerate(sets.values())}, **condition_values}
        if all_values:
            update["ExpressionAttributeValues"] = typed(all_values)
        if not expression:  # nothing of the item changes: its condition is checked alone
            check = {k: v for k, v in update.items() if k != "UpdateExpression"}
            if not check["ExpressionAttributeNames"]:
                del check["ExpressionAttributeNames"]
            return {"ConditionCheck": check}
        return {"Update": update}

    def _add_effects(self, items: list[dict[str, Any]], key: ResourceKey, effects: Effects) -> dict[str, int]:
        positions: dict[str, int] = {}
        if effects.operation is not None:
            positions["operation"] = len(items)
            items.append(self._operation_update(effects.operation, key.subscription_id))
        items.extend(self._operation_update(o, key.subscription_id) for o in effects.more_operations)
        if effects.new_operation is not None:
            items.append(self._operation_put(effects.new_operation, key))
        positions["quotas"] = positions["quotas_end"] = 0
        for i, reservation in enumerate(effects.reservations):
            positions[f"node{i}"] = len(items)
            items.append(self._node_reserve(reservation))
            charged = self._add_quota_charge(items, key.subscription_id, reservation)
            if charged:
                positions["quotas"], positions["quotas_end"] = charged[0], charged[-1] + 1
        for release in effects.releases:
            items.append(self._node_release(release))
            if release.quota is not None and release.quota_charge:
                items.extend(
                    quota_release_items(self._t.name, key.subscription_id, release.quota, release.quota_charge)
                )
        items.extend(meter_start_item(self._t.name, m) for m in effects.meter_starts)
        items.extend(meter_end_item(self._t.name, m) for m in effects.meter_ends)
        return positions

    def _add_quota_charge(self, items: list[dict[str, Any]], subscription_id: str, r: Reservation) -> tuple[int, ...]:
        """Append the quota counters ``r`` charges (domain/quotas.py); their positions."""
        if r.quota is None or not r.quota_charge:
            return ()
        charge = quota_charge_items(self._t.name, subscription_id, r.quota, r.quota_charge)
        start = len(items)
        items.extend(charge)
        return tuple(range(start, start + len(charge)))

    def _node_reserve(self, r: Reservation) -> dict[str, Any]:
        add = "gpuAllocated :g, memoryGbAllocated :m, holdRev :one" + (", childCount :child" if r.child else "")
        hold = ", #hold = :hold" if r.hold is not None else ""
        return {
            "Update": {
                "TableName": self._t.name,
                "Key": typed(keys.item_key(r.node)),
                "UpdateExpression": f"ADD {add} SET gpuFree = gpuFree - :g, memoryGbFree = memoryGbFree - :m{hold}",
                "ConditionExpression": (
                    "attribute_exists(PK) AND availability = :available AND gpuTotal = :gt AND memoryGbTotal = :mt "
                    "AND gpuAllocated <= :gmax AND memoryGbAllocated <= :mmax AND etag = :etag"
                    + (" AND (attribute_not_exists(drainingFor) OR drainingFor = :job)" if r.for_job else "")
                    + (
                        " AND calRev = :cal"
                        if r.calendar_revision
                        else " AND (attribute_not_exists(calRev) OR calRev = :cal)"
                    )
                    + (
                        ""
                        if r.hold_revision is None
                        else " AND holdRev = :held"
                        if r.hold_revision
                        else " AND (attribute_not_exists(holdRev) OR holdRev = :held)"
                    )
                ),
                "ExpressionAttributeValues": typed(
                    {
                        ":g": r.devices,
                        ":m": r.memory_gb,
                        ":one": 1,
                        ":cal": r.calendar_revision,
                        **({":held": r.hold_revision} if r.hold_revision is not None else {}),
                        ":available": str(Availability.AVAILABLE),
                        ":gt": r.device_total,
                        ":mt": r.memory_gb_total,
                        ":gmax": r.device_total - r.devices,
                        ":mmax": r.memory_gb_total - r.memory_gb,
                        ":etag": r.etag,
                        **({":child": r.child} if r.child else {}),
                        **({":job": job_ref(r.for_job)} if r.for_job else {}),
                        **({":hold": hold_value(r.hold)} if r.hold is not None else {}),
                    }
                ),
                **(
                    {"ExpressionAttributeNames": {"#hold": hold_attribute(r.hold.holder)}} if r.hold is not None else {}
                ),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _node_release(self, r: Release) -> dict[str, Any]:
        add = "gpuAllocated :g, memoryGbAllocated :m, holdRev :one" + (", childCount :child" if r.child else "")
        expression = f"ADD {add} SET gpuFree = gpuFree - :g, memoryGbFree = memoryGbFree - :m"
        return {
            "Update": {
                "TableName": self._t.name,
                "Key": typed(keys.item_key(r.node)),
                "UpdateExpression": expression + (" REMOVE #hold" if r.holder else ""),
                "ConditionExpression": "attribute_exists(PK)",
                "ExpressionAttributeValues": typed(
                    {":g": -r.devices, ":m": -r.memory_gb, ":one": 1, **({":child": r.child} if r.child else {})}
                ),
                **({"ExpressionAttributeNames": {"#hold": hold_attribute(r.holder)}} if r.holder else {}),
            }
        }

    def _operation_put(self, operation: Operation, key: ResourceKey) -> dict[str, Any]:
        item = {
            "kind": str(operation.kind),
            **({"owner": operation.owner} if operation.owner else {}),
            "PK": keys.subscription_pk(key.subscription_id),
            "SK": keys.operation_sk(operation.operation_id),
            "entityType": "OperationStatus",
            "rgKey": operation.resource_group.lower(),
            "status": str(operation.status),
            "doc": to_json(operation.body),
            "ttl": int(time.time()) + OPERATION_RETENTION_SECONDS,
        }
        return {
            "Put": {"TableName": self._t.name, "Item": typed(item), "ConditionExpression": "attribute_not_exists(PK)"}
        }

    def _operation_update(self, operation: Operation, subscription_id: str) -> dict[str, Any]:
        return operation_update(self._t.name, operation, subscription_id)

    @staticmethod
    def _raise_typed(
        exc: TransactionFailed,
        *,
        operation: int | None = None,
        subscription: int | None = None,
        nodes: tuple[int, ...] = (),
        quotas: tuple[int, ...] = (),
        reservations: tuple[Reservation, ...] = (),
    ) -> None:
        """The typed error of a cancelled workload transaction, from the positions its items were given (item 0 is
        the workload): the subscription's state, then the workload and its operations, then the node, then the
        quotas."""
        failed = exc.failed
        if subscription is not None and subscription in failed:
            raise SubscriptionNotWritable(str(failed[subscription].get("state", "Unregistered"))) from exc
        if 0 in failed or (operation is not None and operation in failed) or set(failed) - {*nodes, *quotas}:
            raise WorkloadChanged() from exc
        # the first node (of a gang's, in order) that refused
        node, reservation = next(
            ((n, r) for n, r in zip(nodes, reservations, strict=True) if n in failed), (None, None)
        )
        if node is not None:
            current = failed[node]
            if not current:
                raise NodeMissing() from exc
            if current.get("availability") != Availability.AVAILABLE:
                raise NodeUnavailable(str(current.get("availability"))) from exc
            if reservation is not None and (
                current.get("etag") != reservation.etag
                or int(current.get("calRev", 0)) != reservation.calendar_revision
                or (
                    reservation.hold_revision is not None
                    and int(current.get("holdRev", 0)) != reservation.hold_revision
                )
            ):
                raise NodeChanged() from exc
            raise CapacityShortfall(
                int(current.get("gpuTotal", 0)) - int(current.get("gpuAllocated", 0)),
                int(current.get("memoryGbTotal", 0)) - int(current.get("memoryGbAllocated", 0)),
            ) from exc
        for position in quotas:
            if position in failed:
                raise quota_exceeded(failed[position]) from exc
        raise exc


def operation_update(table: str, operation: Operation, subscription_id: str) -> dict[str, Any]:
    """Transaction item: move an operation to its status and body, refused once it has ended."""
    finals = [str(s) for s in FINAL_OPERATION_STATUSES]
    return {
        "Update": {
            "TableName": table,
            "Key": typed(
                {"PK": keys.subscription_pk(subscription_id), "SK": keys.operation_sk(operation.operation_id)}
            ),
            "UpdateExpression": "SET #st = :status, doc = :doc",
            "ConditionExpression": "attribute_exists(PK) AND NOT #st IN (:ok, :failed, :canceled)",
            "ExpressionAttributeNames": {"#st": "status"},
            "ExpressionAttributeValues": typed(
                {
                    ":status": str(operation.status),
                    ":doc": to_json(operation.body),
                    ":ok": finals[0],
                    ":failed": finals[1],
                    ":canceled": finals[2],
                }
            ),
        }
    }
