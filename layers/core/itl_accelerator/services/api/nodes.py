"""sparkNodes service: registration, replace/patch, delete and reads of GPU nodes, with RBAC and audit.

Rules followed: ARM_CONTRACT.md 1-10 and 19-24 for a synchronous tracked resource; DESIGN.md RBAC (admins do all,
consumers read, suppliers change only ``pricing`` and ``availability`` of nodes whose ``owner`` is their subject);
a node holding allocated GPUs cannot be deleted, nor shrunk below its allocations (409).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from itl_accelerator.arm import normalize_location, parse_resource_id
from itl_accelerator.auth import rbac
from itl_accelerator.billing.metering import iso
from itl_accelerator.domain.accelerators import GPU, Accelerator, display_plural
from itl_accelerator.domain.backends import NodeBackend
from itl_accelerator.domain.records import Node, ResourceKey, breaks_bookings
from itl_accelerator.errors import (
    ArmError,
    BadRequest,
    Conflict,
    InvalidParameter,
    NodeReserved,
    SlurmNodeTaken,
    invalid_content,
)
from itl_accelerator.models.nodes import NodeBackendWrite, SparkNodeCreate, SparkNodeWrite
from itl_accelerator.repositories.errors import (
    CapacityInUse,
    EtagMismatch,
    ItemExists,
    ItemMissing,
    StoreError,
    SubscriptionNotWritable,
)
from itl_accelerator.resources import NODES
from itl_accelerator.services.common import arm_rules
from itl_accelerator.services.common.access import Target
from itl_accelerator.services.common.capacity import Capacity
from itl_accelerator.services.common.context import CallContext
from itl_accelerator.services.common.kernel import ResourceKernel, with_etag

if TYPE_CHECKING:
    from itl_accelerator.services.api.reservations import CapacityReservationService

#: Property paths a supplier may change on a node it owns.
SUPPLIER_WRITABLE = ("properties.pricing", "properties.availability")


def render(node: Node) -> dict[str, Any]:
    """The node as returned: stored envelope plus ``etag`` and read-only ``properties.capacity`` (devices, GiB), its
    properties as :func:`_as_today` reads them."""
    doc = with_etag(node.document, node.etag)
    doc["properties"] = {**_as_today(doc["properties"]), "capacity": Capacity.of(node).as_properties()}
    if node.backend_status is not None:  # how its platform reports it (services/schedules/node_health.py)
        doc["properties"]["backendStatus"] = node.backend_status
    return doc


def _as_today(props: dict[str, Any]) -> dict[str, Any]:
    """A node's stored ``properties`` as this version writes them: a node stored before accelerator kinds existed has
    no ``accelerator`` (its hardwareSpecs' GPUs, NVIDIA ones: domain/accelerators.py ``Accelerator.of_properties``)
    and no ``pricing.pricePerAcceleratorHour`` (its ``pricePerGpuHour``); both are added, so it reads, diffs and is
    written back as the GPU node it always was."""
    pricing = dict(props.get("pricing") or {})
    if "pricePerAcceleratorHour" not in pricing and "pricePerGpuHour" in pricing:
        pricing = {
            "currency": pricing.get("currency"),
            "pricePerAcceleratorHour": pricing["pricePerGpuHour"],
            **pricing,
        }
    shown = {
        "owner": props.get("owner"),
        "accelerator": Accelerator.of_properties(props).as_properties(),
        "backend": NodeBackend.of_properties(props).as_properties(),  # a node stored before: the DGX Platform's
        **props,
    }
    return {**shown, "pricing": pricing} if "pricing" in props else shown


def _writable(doc: dict[str, Any]) -> dict[str, Any]:
    """The part of a node document a client controls (for diffs): location (normalised), tags, sku, properties."""
    props = {
        k: v
        for k, v in _as_today(doc["properties"]).items()
        if k not in ("provisioningState", "capacity", "backendStatus")
    }
    return {
        "location": normalize_location(doc["location"]),
        "tags": doc["tags"],
        "sku": doc["sku"],
        "properties": props,
    }


class SparkNodeService:
    """Node operations. Every method takes the :class:`CallContext` and returns rendered ARM envelopes (dicts)."""

    def __init__(
        self,
        kernel: ResourceKernel,
        *,
        clusters: frozenset[str] = frozenset(),
        default_backend: dict[str, str] | None = None,
        reservations: CapacityReservationService | None = None,
    ):
        """``clusters``: the Slurm clusters the deployment configures (a node may name one); ``default_backend``: the
        backend of a node that says none (``DEFAULT_NODE_BACKEND``; None: the DGX Platform)."""
        self._kernel = kernel
        self._nodes = kernel.repositories.nodes
        self._access = kernel.access
        self._clusters = clusters
        self._default_backend = NodeBackendWrite.model_validate(default_backend or {})
        self._reservations = reservations

    # ----------------------------------------------------------------------------------------------- helpers
    def _key(self, subscription_id: str, resource_group: str, name: str) -> ResourceKey:
        return self._kernel.key(NODES, subscription_id, resource_group, name)

    def _document(
        self, ctx: CallContext, key: ResourceKey, body: SparkNodeWrite, previous: Node | None
    ) -> dict[str, Any]:
        props = body.properties
        previous_props = previous.document["properties"] if previous else {}
        return NODES.envelope(
            key.subscription_id,
            key.resource_group,
            key.names,
            location=body.location,
            tags=body.tags or {},
            sku=body.sku.model_dump(mode="json", exclude_none=True),
            system_data=arm_rules.stamp_system_data(ctx, previous.document["systemData"] if previous else None),
            properties={
                "owner": props.owner or previous_props.get("owner") or ctx.principal.subject,
                "accelerator": props.accelerator.model_dump(mode="json", exclude_none=True)
                if props.accelerator
                else None,
                "hardwareSpecs": props.hardware_specs.model_dump(mode="json", exclude_none=True),
                "pricing": body.pricing_document(),
                "availability": props.availability.value,
                "backend": self._backend(props.backend, key, previous).as_properties(),
                "provisioningState": "Succeeded",
            },
        )

    def _backend(self, said: NodeBackendWrite | None, key: ResourceKey, previous: Node | None) -> NodeBackend:
        """Where node ``key``'s work runs: what its body says, else the deployment's default backend. A Slurm node's
        cluster must be one the deployment configures (400 ``InvalidParameter`` naming it otherwise), and a Slurm
        node it newly names no other provider node's (409 :class:`SlurmNodeTaken`: one GSI1 ``Query`` of that Slurm
        node's name; a race of two registrations is settled by the node health sweep, which places on the first
        registered only — the other may still be written, to name another Slurm node or be deleted)."""
        backend = (said or self._default_backend).record(key.names[0])
        if backend.is_slurm and backend.cluster not in self._clusters:
            known = ", ".join(sorted(self._clusters)) or "none"
            raise InvalidParameter(
                f"No Slurm cluster '{backend.cluster}' is configured in this deployment (its clusters: {known}).",
                target="properties.backend.cluster",
            )
        renamed = previous is None or previous.backend != backend
        if (
            backend.is_slurm
            and renamed
            and any(not n.key.same(key) for n in self._nodes.on_cluster(backend.cluster, backend.node_name))
        ):
            raise SlurmNodeTaken(
                f"Slurm node '{backend.node_name}' of cluster '{backend.cluster}' is registered as another node "
                "already; a Slurm node is one provider node.",
                target="properties.backend.nodeName",
            )
        return backend

    @staticmethod
    def _record(key: ResourceKey, document: dict[str, Any], body: SparkNodeWrite, previous: Node | None) -> Node:
        """The node to store: its envelope with a new etag, its capacity totals (GPUs; GiB of GPU memory: GPUs times
        GiB per GPU) and the suppliers that owned it before (a change of owner adds the previous one, who keeps
        reading its own earnings). Allocations are the repository's (what instances and jobs hold stays)."""
        former = list(previous.former_owners) if previous else []
        previous_owner = previous.owner if previous else None
        owner = document["properties"]["owner"]
        if previous_owner and previous_owner != owner and previous_owner not in former:
            former.append(previous_owner)
        accelerator = body.properties.accelerator
        assert accelerator is not None  # the write model fills it (models/nodes.py)
        devices, gpu_memory = int(accelerator.count or 0), int(accelerator.memory_gb_per_device or 0)
        return Node(
            key=key,
            document=document,
            etag=arm_rules.new_etag(),
            device_total=devices,
            memory_gb_total=devices * gpu_memory,
            devices_allocated=previous.devices_allocated if previous else 0,
            memory_gb_allocated=previous.memory_gb_allocated if previous else 0,
            child_count=previous.child_count if previous else 0,
            # how its platform last reported it (the sweep's bookkeeping): it keeps deciding the placement index
            backend_status=previous.backend_status
            if previous and previous.backend == NodeBackend.of_properties(document["properties"])
            else None,
            former_owners=tuple(o for o in former if o != owner),
        )

    def _audit(
        self,
        ctx: CallContext,
        key: ResourceKey,
        action: rbac.Permission,
        summary: str,
        previous: dict[str, Any] | None,
        new: dict[str, Any] | None,
    ) -> Any:
        return self._kernel.audit(ctx, NODES, key, action, summary, previous, new)

    @staticmethod
    def _write_error(exc: StoreError, *, if_match: str | None, kind: str = GPU) -> ArmError:
        """Map a store failure of a write to the ARM error the caller sees (devices named by the node's ``kind``)."""
        if isinstance(exc, CapacityInUse):
            return Conflict(
                "The node holds allocated capacity or child resources "
                f"({exc.devices} {display_plural(kind)}, {exc.memory_gb} GiB, {exc.instances} instances): delete its "
                "instances and jobs first."
            )
        return ResourceKernel.write_error(exc, if_match=if_match)

    @staticmethod
    def _check_devices_unchanged_while_held(previous: Node, node: Node) -> None:
        """409 ``Conflict`` when a node whose devices are held (by instances or jobs) is given another kind, vendor or
        model: the work placed there asked for the devices it holds, as a shrink below what is held is refused. The
        repositories hold the same rule under a concurrent placement (the write is conditioned on nothing held)."""
        if previous.held_identity == node.held_identity or not (
            previous.devices_allocated or previous.memory_gb_allocated
        ):
            return
        if previous.devices == node.devices:  # its backend changed: the work runs there
            raise Conflict(
                f"The node's backend cannot change while {previous.devices_allocated} {display_plural(previous.kind)} of it "
                "are held (the work placed there runs on it): let its jobs end and delete its instances first.",
                target="properties.backend",
            )
        was, now = previous.accelerator, node.accelerator
        raise Conflict(
            f"The node's devices cannot change from {was.vendor} {was.kind} {was.model or '(no model)'} to "
            f"{now.vendor} {now.kind} {now.model or '(no model)'} while {previous.devices_allocated} "
            f"{display_plural(was.kind)} and {previous.memory_gb_allocated} GiB of it are held: let its jobs end and "
            "delete its instances first (or cordon it meanwhile).",
            target="properties.accelerator",
        )

    # ----------------------------------------------------------------------------------------------- reads
    def get(self, ctx: CallContext, subscription_id: str, resource_group: str, name: str) -> dict[str, Any]:
        """The node; 404 ``ResourceNotFound`` when missing or outside the caller's scopes, 403 without read."""
        key = self._key(subscription_id, resource_group, name)
        self._kernel.require(ctx, NODES, key, rbac.NODES_READ)
        stored = self._nodes.get(key)
        if stored is None:
            raise NODES.not_found(key.names, resource_group)
        return render(stored)

    def list(
        self, ctx: CallContext, subscription_id: str, resource_group: str | None, *, top: int, skip_token: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of nodes of a resource group (or of the whole subscription when ``resource_group`` is None), only
        those in the caller's scopes. Returns ``(nodes, next_skip_token)``."""
        page = self._kernel.list_page(
            ctx,
            NODES,
            subscription_id,
            resource_group,
            lambda scope, token: self._nodes.page(scope, top, token),
            skip_token=skip_token,
        )
        return [render(n) for n in page.items], page.token

    # ----------------------------------------------------------------------------------------------- writes
    def put(
        self,
        ctx: CallContext,
        subscription_id: str,
        resource_group: str,
        name: str,
        body: SparkNodeWrite,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
        create_only: bool = False,
        force: bool = False,
    ) -> tuple[dict[str, Any], bool]:
        """Create or replace a node (ARM PUT). Returns ``(node, created)``: created → 201, replaced → 200.

        An identical PUT writes nothing (no new etag, no audit). ``create_only`` (the seed's POST) refuses an
        existing name with 409 ``Conflict``. Errors: 400 (name/provisioningState/location rules), 403, 404, 409
        (capacity below allocations, subscription state, concurrent change), 412 (preconditions).
        """
        key = self._key(subscription_id, resource_group, name)
        acting = self._kernel.require(ctx, NODES, key, rbac.NODES_WRITE, rbac.NODES_PRICING_WRITE)
        previous = self._nodes.get(key)
        return self._put(
            ctx,
            self._identity_for(key, previous, acting),
            body,
            previous,
            acting=acting,
            if_match=if_match,
            if_none_match=if_none_match,
            create_only=create_only,
            force=force,
        )

    @staticmethod
    def _identity_for(key: ResourceKey, previous: Node | None, acting: rbac.Permission) -> ResourceKey:
        """The key whose casing the written node carries: the URL's (ARM: names keep the casing last supplied),
        except for a supplier, who may change pricing and availability and nothing else — its write keeps the
        stored name and resource group exactly as they are."""
        if previous is None or acting == rbac.NODES_WRITE:
            return key
        parsed = parse_resource_id(previous.document["id"])
        if parsed is None:
            return key
        stored_subscription, stored_group, segments = parsed
        return ResourceKey(stored_subscription, stored_group, NODES.segment, (segments[-1][1],))

    def _put(
        self,
        ctx: CallContext,
        key: ResourceKey,
        body: SparkNodeWrite,
        previous: Node | None,
        *,
        acting: rbac.Permission,
        if_match: str | None,
        if_none_match: str | None,
        create_only: bool,
        force: bool = False,
    ) -> tuple[dict[str, Any], bool]:
        """:meth:`put` after the access check, given the node as read (``previous``) and the permission the caller
        acts with (``acting``: ``sparkNodes/write``, or a supplier's ``sparkNodes/pricing/write``)."""
        name = key.names[0]
        arm_rules.check_body_name(body.name, name)
        arm_rules.check_preconditions(
            previous.etag if previous else None, if_match=if_match, if_none_match=if_none_match
        )
        if previous is not None and create_only:
            raise Conflict(f"A sparkNode named '{previous.document['name']}' already exists in this resource group.")
        arm_rules.check_provisioning_state(
            body.properties.provisioning_state,
            previous.document["properties"]["provisioningState"] if previous else None,
        )
        if previous is not None:
            arm_rules.check_location_unchanged(body.location, previous.document["location"])
        try:  # a value said under two names: the one the client changed (models/nodes.py SparkNodeWrite.settled)
            body = body.settled(_as_today(previous.document["properties"]) if previous else None)
        except ValueError as exc:
            raise BadRequest(str(exc), target="properties") from exc
        document = self._document(ctx, key, body, previous)
        self._authorize_change(ctx, key, previous, document, acting)
        if (
            previous is not None
            and _writable(previous.document) == _writable(document)
            and (previous.document["name"] == document["name"] and previous.document["id"] == document["id"])
        ):
            return render(previous), False
        node = self._record(key, document, body, previous)
        if previous is not None:
            self._check_devices_unchanged_while_held(previous, node)
            if breaks_bookings(previous, node) and self._free_of_reservations(
                ctx, previous, force, "its node was changed"
            ):
                # the reservations ended moved its calendar: write it at the calendar as it is now
                previous = replace(previous, calendar_revision=self._calendar_now(previous))
        try:
            if previous is None:
                audit = self._audit(ctx, key, rbac.NODES_WRITE, f"Registered sparkNode '{name}'", None, document)
                self._nodes.create(node, audit)
            else:
                audit = self._audit(
                    ctx,
                    key,
                    acting,
                    f"Updated sparkNode '{name}': "
                    + ", ".join(
                        sorted(arm_rules.changed_paths(_writable(previous.document), _writable(document)))
                        or ["name casing"]
                    ),
                    previous.document,
                    document,
                )
                self._nodes.replace(previous, node, audit)
        except ItemExists as exc:
            raise Conflict("The resource was created by another request at the same time; retry the request.") from exc
        except (SubscriptionNotWritable, CapacityInUse, EtagMismatch, ItemMissing) as exc:
            raise self._write_error(exc, if_match=if_match, kind=node.kind) from exc
        return render(node), previous is None

    def create(
        self, ctx: CallContext, subscription_id: str, resource_group: str, body: SparkNodeCreate
    ) -> dict[str, Any]:
        """The seed's ``POST`` to the collection: create ``body.name``; 409 ``Conflict`` when it exists."""
        node, _ = self.put(ctx, subscription_id, resource_group, body.name, body, create_only=True)
        return node

    def patch(
        self,
        ctx: CallContext,
        subscription_id: str,
        resource_group: str,
        name: str,
        patch: dict[str, Any],
        *,
        if_match: str | None = None,
        force: bool = False,
    ) -> dict[str, Any]:
        """ARM PATCH: JSON merge patch inside ``properties`` and ``sku``; ``tags`` replace the whole set;
        ``location`` may only be repeated. 404 when missing; otherwise as :meth:`put` (the result is validated as a
        full PUT body, so e.g. sku/gpuCount agreement still holds)."""
        key = self._key(subscription_id, resource_group, name)
        acting = self._kernel.require(ctx, NODES, key, rbac.NODES_WRITE, rbac.NODES_PRICING_WRITE)
        if not isinstance(patch, dict):
            raise BadRequest("The PATCH body must be a JSON object.")
        unknown = set(patch) - {"tags", "sku", "properties", "location", "name", "id", "type", "etag", "systemData"}
        if unknown:
            raise BadRequest(
                f"Unknown top-level field(s) in PATCH: {', '.join(sorted(unknown))}.", target=sorted(unknown)[0]
            )
        _refuse_nulls(patch)
        previous = self._nodes.get(key)
        if previous is None:
            arm_rules.check_preconditions(None, if_match=if_match, if_none_match=None)
            raise NODES.not_found(key.names, resource_group)
        current = previous.document
        merged: dict[str, Any] = {
            "location": patch.get("location") or current["location"],
            "tags": patch["tags"] if patch.get("tags") is not None else ({} if "tags" in patch else current["tags"]),
            "sku": arm_rules.merge_patch(current["sku"], patch.get("sku", {})),
            "properties": arm_rules.merge_patch(
                {k: v for k, v in current["properties"].items() if k != "provisioningState"},
                patch.get("properties", {}) if isinstance(patch.get("properties", {}), dict) else patch["properties"],
            ),
        }
        if isinstance(patch.get("properties"), dict) and "provisioningState" in patch["properties"]:
            merged["properties"]["provisioningState"] = patch["properties"]["provisioningState"]
        if "name" in patch:
            merged["name"] = patch["name"]
        if acting != rbac.NODES_WRITE:
            # a supplier's patch is judged by what it touches before its values are: 403 beats 400
            self._authorize_supplier(ctx, key, previous, _writable({**current, **merged}))
        body = _validate_write(merged)
        node, _ = self._put(
            ctx,
            self._identity_for(key, previous, acting),
            body,
            previous,
            acting=acting,
            if_match=if_match,
            if_none_match=None,
            create_only=False,
            force=force,
        )
        return node

    def delete(
        self,
        ctx: CallContext,
        subscription_id: str,
        resource_group: str,
        name: str,
        *,
        if_match: str | None = None,
        force: bool = False,
    ) -> bool:
        """Delete a node (synchronous). Returns False when there was nothing to delete (ARM RPC: 204).

        409 ``Conflict`` when the node holds allocated GPUs or memory; 409 ``NodeReserved`` under capacity
        reservations not yet over, unless ``force`` (:meth:`_free_of_reservations`); 412 on a stale ``If-Match``.
        """
        key = self._key(subscription_id, resource_group, name)
        self._kernel.require(ctx, NODES, key, rbac.NODES_DELETE)
        previous = self._nodes.get(key)
        if previous is None:
            if if_match is not None:
                arm_rules.check_preconditions(None, if_match=if_match, if_none_match=None)
            return False
        arm_rules.check_preconditions(previous.etag, if_match=if_match, if_none_match=None)
        if self._free_of_reservations(ctx, previous, force, "its node was deleted"):
            # the reservations ended moved its calendar: delete it as it is now (a booking written later refuses it)
            previous = self._nodes.get(key)
            if previous is None:
                return False
        audit = self._audit(
            ctx, key, rbac.NODES_DELETE, f"Deleted sparkNode '{previous.document['name']}'", previous.document, None
        )
        try:
            self._nodes.delete(previous, audit)
        except ItemMissing:
            return False
        except (CapacityInUse, EtagMismatch) as exc:
            raise self._write_error(exc, if_match=if_match, kind=previous.kind) from exc
        return True

    def _calendar_now(self, node: Node) -> int:
        """``node``'s calendar revision as stored now (its own when it is gone: the write then finds it missing)."""
        stored = self._nodes.get(node.key)
        return stored.calendar_revision if stored is not None else node.calendar_revision

    def _free_of_reservations(self, ctx: CallContext, node: Node, force: bool, why: str) -> bool:
        """A change that takes ``node`` out of service (domain/records.py :func:`breaks_bookings`, or its deletion) under capacity
        reservations not yet over: 409 ``NodeReserved`` naming them — or, ``force``, they end first, each billed only
        for what it served (services/api/reservations.py ``end_on_node``; issue 44: "refused unless forced"). Each
        reservation ends in its own transaction before the node's change is written. Whether any was ended."""
        if self._reservations is None:
            return False
        live = self._reservations.in_the_way(node)
        if not live:
            return False
        if not force:
            named = ", ".join(f"{b.reservation.rsplit('/', 1)[-1]} ({iso(b.start)} to {iso(b.end)})" for b in live)
            raise NodeReserved(
                f"The node '{node.name}' is booked by capacity reservations not yet over: {named}. Wait until they "
                "end, or send force=true to end them (billed only for what they served; their owners are told)."
            )
        self._reservations.end_on_node(ctx, node, why)
        return True

    # ----------------------------------------------------------------------------------------------- RBAC detail
    def _authorize_change(
        self,
        ctx: CallContext,
        key: ResourceKey,
        previous: Node | None,
        document: dict[str, Any],
        acting: rbac.Permission,
    ) -> None:
        """Admins (acting with ``sparkNodes/write``) may change anything. A supplier (``sparkNodes/pricing/write``)
        may change only pricing and availability, only of an existing node it owns; anything else is 403
        (audited)."""
        if acting == rbac.NODES_WRITE:
            return
        self._authorize_supplier(ctx, key, previous, _writable(document))

    def _authorize_supplier(
        self, ctx: CallContext, key: ResourceKey, previous: Node | None, wanted: dict[str, Any]
    ) -> None:
        """403 (audited) unless ``previous`` exists, is owned by the caller, and ``wanted`` (the writable part of
        the node after the change) differs from it only under pricing and availability."""
        allowed = previous is not None and previous.owner == ctx.principal.subject
        if allowed and previous is not None:
            changes = arm_rules.changed_paths(_writable(previous.document), wanted)
            allowed = all(any(c == p or c.startswith(p + ".") for p in SUPPLIER_WRITABLE) for c in changes)
        if not allowed:
            self._access.deny(
                ctx,
                rbac.NODES_WRITE,
                Target(
                    subscription_id=key.subscription_id,
                    resource_group=key.resource_group,
                    resource_id=NODES.id(key.subscription_id, key.resource_group, key.names),
                    resource_type=NODES.type_name,
                    resource_name=key.names[0],
                ),
            )


#: Members a merge patch may not remove with ``null`` (their removal would silently reset them to a default: a price
#: of 0, USD, an Available node, the caller as owner): a node always has them; to change one, send its new value.
NOT_NULLABLE = (
    ("properties", "pricing"),
    ("properties", "pricing", "currency"),
    ("properties", "pricing", "pricePerGpuHour"),
    ("properties", "pricing", "pricePerAcceleratorHour"),
    ("properties", "pricing", "billingIncrementSeconds"),
    ("properties", "pricing", "minimumBillableSeconds"),
    ("properties", "availability"),
    ("properties", "owner"),
    ("properties", "hardwareSpecs"),
    ("properties", "accelerator"),
    ("sku", "name"),
)


def _refuse_nulls(patch: dict[str, Any]) -> None:
    """400 ``InvalidRequestContent`` naming the member when a PATCH sends ``null`` for one of :data:`NOT_NULLABLE`
    (RFC 7396 would remove it; here it has no default to fall back to that the caller could mean)."""
    for path in NOT_NULLABLE:
        parent: Any = patch
        for part in path[:-1]:
            parent = parent.get(part) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and path[-1] in parent and parent[path[-1]] is None:
            target = ".".join(path)
            raise BadRequest(f"'{target}' cannot be null: send its new value to change it.", target=target)


def _validate_write(data: dict[str, Any]) -> SparkNodeWrite:
    """Validate a merged PATCH result as a PUT body; pydantic errors become 400 ``InvalidRequestContent``."""
    try:
        return SparkNodeWrite.model_validate(data)
    except ValidationError as exc:
        raise invalid_content(exc.errors()) from exc
