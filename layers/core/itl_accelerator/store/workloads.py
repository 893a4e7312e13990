"""Workloads placed on nodes (instances, jobs): their items, their long-running operations, and the capacity they
hold — written through intent-level methods, each one transaction, each failure a typed error.

- :meth:`WorkloadStore.accept` — a new or re-provisioned workload, its operation, its audit item and (optionally) its
  reservation of GPUs on a node.
- :meth:`WorkloadStore.transition` — a workload moves from the state it was read in to the next one: optionally
  reserving or releasing capacity and moving its operation on, always with its audit item.
- :meth:`WorkloadStore.remove` — the workload item goes, with what it still holds given back.

Capacity is never over-committed: a reservation is a conditional ``ADD`` on the node item
(``allocated <= total - requested`` against totals read in the same request, and ``availability = Available``);
a release is conditioned on the workload still holding its reservation, so it happens exactly once.

Every workload that a workflow owns carries a *lease* (``leaseUntil``, epoch seconds) in the sparse index GSI2
(``GSI2PK = LEASE#{shard}``, ``GSI2SK = {leaseUntil}#{PK}#{SK}``): a workflow that makes progress renews it, the
final transition removes it, and the reconciler finds the workloads whose lease ran out (:meth:`expired_leases`).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.store import keys
from itl_accelerator.store.codec import plain, to_json, typed
from itl_accelerator.store.errors import (
    CapacityShortfall,
    NodeChanged,
    NodeMissing,
    NodeUnavailable,
    SubscriptionNotWritable,
    TransactionFailed,
    WorkloadChanged,
)
from itl_accelerator.store.keys import ResourceKey
from itl_accelerator.store.resources import CHILD_COUNT, ResourceStore, StoredResource
from itl_accelerator.store.usage import UsageStore

#: Operation status items are kept at least 24 h (ARM_CONTRACT.md line 14); here 7 days, then TTL removes them.
OPERATION_RETENTION_SECONDS = 7 * 24 * 3600
FINAL_OPERATION_STATUSES = ("Succeeded", "Failed", "Canceled")
#: Partitions of the lease index: the reconciler queries each, so no single partition takes every lease write.
LEASE_SHARDS = 4
#: A value of ``lease_until`` that removes the lease (the workload reached a state no workflow owns).
NO_LEASE = -1.0


@dataclass
class WorkloadRecord:
    """A workload item: its ARM envelope ``document`` and the attributes its workflows work with.

    ``state``: ``provisioningState``; ``gpus``/``memory_gb``: what it reserves (GPUs, GiB); ``capacity_reserved``:
    whether it holds them now; ``node``: where (an instance: its parent; a job: the node it was placed on);
    ``dgx_id``: its id on the DGX Platform; ``lease_until``: epoch seconds, None when no workflow owns it;
    ``extra``: attributes of one workload type (e.g. a job's ``status``), stored as top-level attributes.
    """

    key: ResourceKey
    document: dict[str, Any]
    etag: str
    state: str
    operation_id: str | None = None
    delete_operation_id: str | None = None
    spec_hash: str = ""
    gpus: int = 0
    memory_gb: int = 0
    capacity_reserved: bool = False
    cancel_requested: bool = False
    dgx_id: str | None = None
    location: str = ""
    node: ResourceKey | None = None
    lease_until: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def node_key(self) -> ResourceKey:
        """Where the capacity is (an instance's parent when ``node`` is not set)."""
        return self.node or self.key.parent()


@dataclass(frozen=True)
class Reservation:
    """``gpus``/``memory_gb`` to take on ``node`` whose totals were read as ``totals`` (``gpuTotal``,
    ``memoryGbTotal``) and whose etag was ``etag`` (the reservation fails with :class:`NodeChanged` if the node was
    written since: the workload locks the billing terms it read); ``child`` is added to its child count (1 for a new
    instance); ``job`` (a job's sort key) may take a node that is being drained for it, which nothing else may."""

    node: ResourceKey
    gpus: int
    memory_gb: int
    totals: dict[str, int]
    etag: str
    child: int = 0
    job: str | None = None


@dataclass(frozen=True)
class Release:
    """``gpus``/``memory_gb`` given back to ``node``; ``child`` added to its child count (-1 when an instance goes)."""

    node: ResourceKey
    gpus: int
    memory_gb: int
    child: int = 0


#: A transition's expectations: attribute → the value it must have, a tuple of allowed values, or None (absent).
Expect = dict[str, Any]

_WORKLOAD_ATTRIBUTES = {
    "provisioningState",
    "operationId",
    "deleteOperationId",
    "specHash",
    "gpus",
    "memoryGb",
    "capacityReserved",
    "cancelRequested",
    "dgxId",
    "location",
    "nodeResourceGroup",
    "nodeName",
    "leaseUntil",
}


#: Kinds of entries in the lease index: ``LEASE`` — a workflow owns the item and must make progress by then (the
#: reconciler's); ``TRACK`` — a running job whose state on the DGX Platform is due to be checked then (the job
#: tracker's).
LEASE, TRACK = "LEASE", "TRACK"


def lease_partition(pk: str, sk: str, kind: str = LEASE) -> str:
    """The lease-index partition of an item (stable: a hash of its key)."""
    return f"{kind}#{int(hashlib.sha256(f'{pk}#{sk}'.encode()).hexdigest(), 16) % LEASE_SHARDS}"


def lease_values(pk: str, sk: str, until: float, kind: str = LEASE) -> dict[str, Any]:
    """The attributes that put an item in the lease index (``kind`` LEASE or TRACK) until ``until`` (epoch s)."""
    return {
        "leaseUntil": int(until),
        "GSI2PK": lease_partition(pk, sk, kind),
        "GSI2SK": f"{int(until):012d}#{pk}#{sk}",
    }


class StoredOperation(NamedTuple):
    """An operation status item: its ``body`` (the Azure-AsyncOperation document), the resource group key of its
    resource, its ``kind`` (``provision``, ``deprovision``, ``job``, ``cancel``) and, for a job's operations, the
    job's submitter (``owner``): who may read it after the job itself is gone."""

    body: dict[str, Any]
    rg_key: str
    kind: str
    owner: str | None = None


class WorkloadStore(ResourceStore, UsageStore):
    """:class:`ResourceStore` plus workloads, their operations and capacity, and the meters of what they use
    (:class:`UsageStore`)."""

    # ----------------------------------------------------------------------------------------------- reads
    def get_workload(self, key: ResourceKey) -> WorkloadRecord | None:
        """One consistent ``GetItem``."""
        item = self.get_item(key.pk, key.sk)
        return self._workload(key, item) if item else None

    def get_workload_and_node(
        self, key: ResourceKey, node_key: ResourceKey
    ) -> tuple[WorkloadRecord | None, StoredResource | None]:
        """A workload and a node in one ``BatchGetItem`` (consistent reads)."""
        wanted = [{"PK": key.pk, "SK": key.sk}, {"PK": node_key.pk, "SK": node_key.sk}]
        response = self._db.batch_get_item(
            RequestItems={self._table: {"Keys": [typed(k) for k in wanted], "ConsistentRead": True}}
        )
        found = {(i["PK"]["S"], i["SK"]["S"]): plain(i) for i in response.get("Responses", {}).get(self._table, [])}
        if response.get("UnprocessedKeys", {}).get(self._table, {}).get("Keys"):  # rare (throttling): point reads
            return self.get_workload(key), self.get_resource(node_key)
        workload_item = found.get((key.pk, key.sk))
        node_item = found.get((node_key.pk, node_key.sk))
        return (
            self._workload(key, workload_item) if workload_item else None,
            self._resource_from_item(node_key, node_item) if node_item else None,
        )

    @staticmethod
    def _workload(key: ResourceKey, item: dict[str, Any]) -> WorkloadRecord:
        node = None
        if item.get("nodeName"):
            node = ResourceKey(key.subscription_id, item["nodeResourceGroup"], "sparkNodes", (item["nodeName"],))
        reserved = {"PK", "SK", "entityType", "resourceGroup", "rgKey", "names", "id", "etag", "doc"}
        return WorkloadRecord(
            key=key,
            document=json.loads(item["doc"]),
            etag=item["etag"],
            state=item["provisioningState"],
            operation_id=item.get("operationId"),
            delete_operation_id=item.get("deleteOperationId"),
            spec_hash=item.get("specHash", ""),
            gpus=int(item.get("gpus", 0)),
            memory_gb=int(item.get("memoryGb", 0)),
            capacity_reserved=bool(item.get("capacityReserved", False)),
            cancel_requested=bool(item.get("cancelRequested", False)),
            dgx_id=item.get("dgxId"),
            location=item.get("location", ""),
            node=node,
            lease_until=float(item["leaseUntil"]) if item.get("leaseUntil") is not None else None,
            extra={
                k: v
                for k, v in item.items()
                if k not in reserved and k not in _WORKLOAD_ATTRIBUTES and not k.startswith("GSI")
            },
        )

    def get_operation(self, subscription_id: str, operation_id: str) -> StoredOperation | None:
        """The operation status item, or None. One ``GetItem``."""
        item = self.get_item(keys.subscription_pk(subscription_id), keys.operation_sk(operation_id))
        if not item:
            return None
        return StoredOperation(json.loads(item["doc"]), item["rgKey"], item.get("kind", ""), item.get("owner"))

    def expired_leases(self, now: float, limit: int, kind: str = LEASE) -> list[ResourceKey]:
        """Keys of at most ``limit`` workloads whose lease (``kind``: LEASE, or TRACK for running jobs) ended before
        ``now`` (epoch seconds), oldest first within each lease partition: one ``Query`` of GSI2 per partition
        (eventually consistent: the caller reads each item again, consistently, before acting)."""
        found: list[ResourceKey] = []
        for shard in range(LEASE_SHARDS):
            if len(found) >= limit:
                break
            response = self._db.query(
                TableName=self._table,
                IndexName="GSI2",
                KeyConditionExpression="GSI2PK = :p AND GSI2SK < :now",
                ExpressionAttributeValues=typed({":p": f"{kind}#{shard}", ":now": f"{int(now):012d}#"}),
                Limit=limit - len(found),
            )
            for item in map(plain, response.get("Items", [])):
                subscription = str(item["PK"]).split(keys.SEP)[1]
                names = tuple(json.loads(item["names"]))
                found.append(ResourceKey(subscription, item["resourceGroup"], item["entityType"], names))
        return found

    # ----------------------------------------------------------------------------------------------- writes
    def accept(
        self,
        record: WorkloadRecord,
        *,
        replacing_etag: str | None,
        operation: dict[str, Any],
        operation_kind: str,
        audit: AuditEvent,
        reservation: Reservation | None = None,
        operation_owner: str | None = None,
    ) -> None:
        """Write a new workload (``replacing_etag`` None: the name must be free) or replace one still at
        ``replacing_etag``, with its new operation, its audit item, the subscription's state check and, when
        given, its reservation — one transaction.

        Raises :class:`WorkloadChanged` (the name was taken / the workload changed meanwhile), :class:`NodeMissing`,
        :class:`NodeUnavailable`, :class:`CapacityShortfall`, :class:`SubscriptionNotWritable`.
        """
        put: dict[str, Any] = {
            "TableName": self._table,
            "Item": typed(self._workload_item(record)),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if replacing_etag is None:
            put["ConditionExpression"] = "attribute_not_exists(PK)"
        else:
            put["ConditionExpression"] = "etag = :expected"
            put["ExpressionAttributeValues"] = typed({":expected": replacing_etag})
        items = [
            {"Put": put},
            self._operation_put(record.key, operation, operation_kind, operation_owner),
            self.audit_put(audit),
            self.subscription_check(record.key.subscription_id),
        ]
        if reservation is not None:
            items.append(self._node_reserve(reservation))
        try:
            self.transact(items)
        except TransactionFailed as exc:
            self._raise_typed(
                exc,
                workload=0,
                subscription=3,
                node=4 if reservation else None,
                node_etag=reservation.etag if reservation else None,
            )

    def transition(
        self,
        key: ResourceKey,
        *,
        expect: Expect,
        set_values: dict[str, Any],
        audit: AuditEvent,
        remove: tuple[str, ...] = (),
        operation: dict[str, Any] | None = None,
        more_operations: tuple[dict[str, Any], ...] = (),
        new_operation: tuple[dict[str, Any], str] | tuple[dict[str, Any], str, str] | None = None,
        reservation: Reservation | None = None,
        release: Release | None = None,
        lease_until: float | None = None,
        lease_kind: str = LEASE,
        extra: tuple[dict[str, Any], ...] = (),
    ) -> None:
        """Move a workload on: ``SET`` ``set_values`` (a ``document`` value is stored as the JSON envelope) and
        ``REMOVE`` ``remove`` if every expectation in ``expect`` holds; with its audit item; optionally moving its
        operation to ``operation`` (and others to ``more_operations``; each refused once that operation is final)
        or starting a new one (``new_operation``: the status body and its kind), reserving or releasing capacity,
        and renewing (``lease_until`` epoch seconds, in the ``lease_kind`` index) or ending (:data:`NO_LEASE`) its
        lease; ``extra``: more transaction items that belong to the change (e.g. starting or ending its meter,
        store/meters.py). No subscription-state check: workflows finish what was accepted,
        and deletes are allowed in every state (ARM_CONTRACT.md line 27).

        Raises :class:`WorkloadChanged` (an expectation failed or the operation is already final),
        :class:`NodeMissing`, :class:`NodeUnavailable`, :class:`CapacityShortfall`.
        """
        values = dict(set_values)
        drop = list(remove)
        if lease_until == NO_LEASE:
            drop += ["leaseUntil", "GSI2PK", "GSI2SK"]
        elif lease_until is not None:
            values.update(lease_values(key.pk, key.sk, lease_until, lease_kind))
        items = [self._workload_update(key, values, tuple(drop), expect), self.audit_put(audit)]
        positions: dict[str, int] = {}
        if operation is not None:
            positions["operation"] = len(items)
            items.append(self._operation_update(key.subscription_id, operation))
        for other in more_operations:
            items.append(self._operation_update(key.subscription_id, other))
        if new_operation is not None:
            items.append(self._operation_put(key, *new_operation))
        if reservation is not None:
            positions["node"] = len(items)
            items.append(self._node_reserve(reservation))
        if release is not None:
            items.append(self._node_release(release))
        items.extend(extra)
        try:
            self.transact(items)
        except TransactionFailed as exc:
            self._raise_typed(
                exc,
                workload=0,
                operation=positions.get("operation"),
                node=positions.get("node"),
                node_etag=reservation.etag if reservation else None,
            )

    def remove(
        self,
        key: ResourceKey,
        *,
        expect: Expect,
        audit: AuditEvent,
        operation: dict[str, Any] | None = None,
        release: Release | None = None,
    ) -> None:
        """Delete a workload item if every expectation holds, giving back ``release`` and moving ``operation`` on,
        with the audit item — one transaction. Raises :class:`WorkloadChanged`."""
        condition, names, values = self._expectation(expect)
        items: list[dict[str, Any]] = [
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": typed({"PK": key.pk, "SK": key.sk}),
                    "ConditionExpression": condition,
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": typed(values),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            self.audit_put(audit),
        ]
        if operation is not None:
            items.append(self._operation_update(key.subscription_id, operation))
        if release is not None:
            items.append(self._node_release(release))
        try:
            self.transact(items)
        except TransactionFailed as exc:
            self._raise_typed(exc, workload=0, operation=2 if operation is not None else None)

    def renew_lease(
        self,
        key: ResourceKey,
        until: float,
        *,
        expect: Expect,
        kind: str = LEASE,
        also_set: dict[str, Any] | None = None,
    ) -> bool:
        """Extend (or shorten) a workload's lease to ``until`` (epoch seconds; :data:`NO_LEASE` ends it) if
        ``expect`` holds, with ``also_set`` (workflow bookkeeping such as a task token): bookkeeping of the
        workflow that owns it, not a change of the resource (no audit item). Returns whether it was written."""
        extra = dict(also_set or {})
        if until == NO_LEASE:
            update = self._workload_update(key, extra, ("leaseUntil", "GSI2PK", "GSI2SK"), expect)["Update"]
        else:
            values = {**extra, **lease_values(key.pk, key.sk, until, kind)}
            update = self._workload_update(key, values, (), expect)["Update"]
        update.pop("ReturnValuesOnConditionCheckFailure")
        try:
            self._db.update_item(**update)
        except self._db.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def finish_operation(self, subscription_id: str, operation: dict[str, Any]) -> bool:
        """Move an operation to ``operation``'s status on its own unless it is already final. Returns whether it
        moved."""
        try:
            self.transact([self._operation_update(subscription_id, operation)])
        except TransactionFailed:
            return False
        return True

    # ----------------------------------------------------------------------------------------------- items
    def _workload_item(self, record: WorkloadRecord) -> dict[str, Any]:
        from itl_accelerator.store.resources import ResourceWrite

        item = self._resource_item(ResourceWrite(record.key, record.document, record.etag))
        item.update(record.extra)
        item.update(
            {
                "provisioningState": record.state,
                "specHash": record.spec_hash,
                "gpus": record.gpus,
                "memoryGb": record.memory_gb,
                "capacityReserved": record.capacity_reserved,
                "cancelRequested": record.cancel_requested,
                "location": record.location,
            }
        )
        optional = {
            "operationId": record.operation_id,
            "deleteOperationId": record.delete_operation_id,
            "dgxId": record.dgx_id,
            "nodeResourceGroup": record.node.resource_group if record.node else None,
            "nodeName": record.node.names[-1] if record.node else None,
        }
        item.update({k: v for k, v in optional.items() if v})
        if record.lease_until is not None:
            item.update(lease_values(record.key.pk, record.key.sk, record.lease_until))
        return item

    @staticmethod
    def _expectation(expect: Expect) -> tuple[str, dict[str, str], dict[str, Any]]:
        """Condition expression, names and values for ``expect`` (always: the item exists)."""
        parts, names, values = ["attribute_exists(PK)"], {}, {}
        for i, (attr, wanted) in enumerate(expect.items()):
            names[f"#e{i}"] = attr
            if wanted is None:
                parts.append(f"attribute_not_exists(#e{i})")
            elif isinstance(wanted, tuple):
                options = []
                for j, option in enumerate(wanted):
                    values[f":e{i}_{j}"] = option
                    options.append(f":e{i}_{j}")
                parts.append(f"#e{i} IN ({', '.join(options)})")
            else:
                values[f":e{i}"] = wanted
                parts.append(f"#e{i} = :e{i}")
        return " AND ".join(parts), names, values

    def _workload_update(
        self, key: ResourceKey, set_values: dict[str, Any], remove: tuple[str, ...], expect: Expect
    ) -> dict[str, Any]:
        values = dict(set_values)
        if "document" in values:
            values["doc"] = to_json(values.pop("document"))
        condition, names, condition_values = self._expectation(expect)
        names.update({f"#s{i}": k for i, k in enumerate(values)})
        names.update({f"#r{i}": k for i, k in enumerate(remove)})
        expression = "SET " + ", ".join(f"#s{i} = :s{i}" for i in range(len(values))) if values else ""
        if remove:
            expression += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(remove)))
        update = {
            "TableName": self._table,
            "Key": typed({"PK": key.pk, "SK": key.sk}),
            "UpdateExpression": expression.strip(),
            "ConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        all_values = {**{f":s{i}": v for i, v in enumerate(values.values())}, **condition_values}
        if all_values:
            update["ExpressionAttributeValues"] = typed(all_values)
        return {"Update": update}

    def _node_reserve(self, reservation: Reservation) -> dict[str, Any]:
        r = reservation
        add = "gpuAllocated :g, memoryGbAllocated :m" + (f", {CHILD_COUNT} :child" if r.child else "")
        return {
            "Update": {
                "TableName": self._table,
                "Key": typed({"PK": r.node.pk, "SK": r.node.sk}),
                "UpdateExpression": f"ADD {add} SET gpuFree = gpuFree - :g, memoryGbFree = memoryGbFree - :m",
                "ConditionExpression": (
                    "attribute_exists(PK) AND availability = :available AND gpuTotal = :gt AND memoryGbTotal = :mt "
                    "AND gpuAllocated <= :gmax AND memoryGbAllocated <= :mmax AND etag = :etag"
                    + (" AND (attribute_not_exists(drainingFor) OR drainingFor = :job)" if r.job else "")
                ),
                "ExpressionAttributeValues": typed(
                    {
                        ":g": r.gpus,
                        ":m": r.memory_gb,
                        ":available": "Available",
                        ":gt": r.totals["gpuTotal"],
                        ":mt": r.totals["memoryGbTotal"],
                        ":gmax": r.totals["gpuTotal"] - r.gpus,
                        ":mmax": r.totals["memoryGbTotal"] - r.memory_gb,
                        ":etag": r.etag,
                        **({":child": r.child} if r.child else {}),
                        **({":job": r.job} if r.job else {}),
                    }
                ),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def _node_release(self, release: Release) -> dict[str, Any]:
        r = release
        add = "gpuAllocated :g, memoryGbAllocated :m" + (f", {CHILD_COUNT} :child" if r.child else "")
        return {
            "Update": {
                "TableName": self._table,
                "Key": typed({"PK": r.node.pk, "SK": r.node.sk}),
                "UpdateExpression": f"ADD {add} SET gpuFree = gpuFree - :g, memoryGbFree = memoryGbFree - :m",
                "ConditionExpression": "attribute_exists(PK)",
                "ExpressionAttributeValues": typed(
                    {":g": -r.gpus, ":m": -r.memory_gb, **({":child": r.child} if r.child else {})}
                ),
            }
        }

    def _operation_put(
        self, key: ResourceKey, operation: dict[str, Any], kind: str, owner: str | None = None
    ) -> dict[str, Any]:
        item = {
            "kind": kind,
            **({"owner": owner} if owner else {}),
            "PK": keys.subscription_pk(key.subscription_id),
            "SK": keys.operation_sk(operation["name"]),
            "entityType": "OperationStatus",
            "rgKey": key.resource_group.lower(),
            "status": operation["status"],
            "doc": to_json(operation),
            "ttl": int(time.time()) + OPERATION_RETENTION_SECONDS,
        }
        return {
            "Put": {"TableName": self._table, "Item": typed(item), "ConditionExpression": "attribute_not_exists(PK)"}
        }

    def _operation_update(self, subscription_id: str, operation: dict[str, Any]) -> dict[str, Any]:
        return {
            "Update": {
                "TableName": self._table,
                "Key": typed({"PK": keys.subscription_pk(subscription_id), "SK": keys.operation_sk(operation["name"])}),
                "UpdateExpression": "SET #st = :status, doc = :doc",
                "ConditionExpression": "attribute_exists(PK) AND NOT #st IN (:ok, :failed, :canceled)",
                "ExpressionAttributeNames": {"#st": "status"},
                "ExpressionAttributeValues": typed(
                    {
                        ":status": operation["status"],
                        ":doc": to_json(operation),
                        ":ok": FINAL_OPERATION_STATUSES[0],
                        ":failed": FINAL_OPERATION_STATUSES[1],
                        ":canceled": FINAL_OPERATION_STATUSES[2],
                    }
                ),
            }
        }

    @staticmethod
    def _raise_typed(
        exc: TransactionFailed,
        *,
        workload: int,
        operation: int | None = None,
        subscription: int | None = None,
        node: int | None = None,
        node_etag: str | None = None,
    ) -> None:
        """The typed error of a cancelled workload transaction, from the positions this store gave its items
        (``node_etag``: the etag the reservation expected)."""
        failed = exc.failed
        if subscription is not None and subscription in failed:
            raise SubscriptionNotWritable(str(failed[subscription].get("state", "Unregistered"))) from exc
        if workload in failed or (operation is not None and operation in failed) or set(failed) - {node}:
            raise WorkloadChanged(failed.get(workload, {})) from exc
        if node is not None and node in failed:
            current = failed[node]
            if not current:
                raise NodeMissing() from exc
            if current.get("availability") != "Available":
                raise NodeUnavailable(str(current.get("availability"))) from exc
            if node_etag is not None and current.get("etag") != node_etag:
                raise NodeChanged() from exc
            counters = {
                k: int(current.get(k, 0)) for k in ("gpuTotal", "gpuAllocated", "memoryGbTotal", "memoryGbAllocated")
            }
            raise CapacityShortfall(
                counters["gpuTotal"] - counters["gpuAllocated"],
                counters["memoryGbTotal"] - counters["memoryGbAllocated"],
            ) from exc
        raise exc
