"""Accelerator quotas (domain/quotas.py) as the API serves them: the quotas a subscription's operators set per
location — per kind (``gpus``, ``tpus``, ``npus``: every model) and per kind and model (``gpus-{model}``,
``tpus-{model}``) — and the usages every member of the subscription may read.

Rules: reading quotas and usages needs ``locations/quotas/read`` in the subscription (consumers, suppliers, admins);
setting or removing one needs ``locations/quotas/write`` over the whole subscription (admins: the provider's
operators). A ``PUT`` is idempotent (the same limit again writes nothing) and honours ``If-Match``; racing PUTs that
set a limit where none was set create it exactly once (one 201 and one audit item; the others see it set and answer
as a replace would); a ``DELETE`` removes the limit (204 when none was set). Enforcement is not here: the
reservation of an instance or a job counts its GPUs in the quotas of its node's location and model in its own
transaction (repositories), refused with 409 ``QuotaExceeded`` past a limit; a limit set, changed or removed reaches
the waiting jobs at once through the table's stream (services/streams/fleet.py).

Names (issues 26, 29): ``{kind}s``, or ``{kind}s-{model}`` with the model as placement compares it (``gpu_model_key``: the node's
``gpuModel`` lower-cased without spaces, its ``-``, ``.`` and ``_`` kept: ``A100-80GB`` → ``gpus-a100-80gb``), so
every name the usages list shows can be set. A model quota no node of the subscription in its location has is
accepted (a quota may come before the nodes) and answered with ``isQuotaApplicable: false``.
"""

from __future__ import annotations

from typing import Any

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.arm import parse_location, validate_subscription_id
from itl_accelerator.auth import rbac
from itl_accelerator.domain.quotas import (
    ALL_GPUS,
    QUOTA_NAME,
    QuotaUsage,
    key_of_quota,
    localized_name,
    quota_names,
)
from itl_accelerator.errors import AnotherOperationInProgress, InvalidParameter, ResourceNotFound
from itl_accelerator.models.quotas import QuotaWrite
from itl_accelerator.repositories.errors import EtagMismatch
from itl_accelerator.repositories.protocols import NodeRepository, QuotaRepository
from itl_accelerator.services.common import arm_rules
from itl_accelerator.services.common.access import Access, Target
from itl_accelerator.services.common.audit_events import build_event
from itl_accelerator.services.common.context import CallContext
from itl_accelerator.services.common.kernel import ResourceKernel
from itl_accelerator.services.common.reattempt import reattempt

TYPE = f"{PROVIDER_NAMESPACE}/locations/quotas"
#: Reads-and-judgements of a quota write while others set or change it (``EtagMismatch``), before 409.
WRITE_ATTEMPTS = 5


def quota_id(subscription_id: str, location: str, name: str) -> str:
    """The ARM id of a quota."""
    return f"/subscriptions/{subscription_id}/providers/{PROVIDER_NAMESPACE}/locations/{location}/quotas/{name}"


def render(usage: QuotaUsage, applicable: bool = True) -> dict[str, Any]:
    """A quota with a limit as returned: its envelope, the limit, the GPUs held now and whether any node it could
    limit exists (``applicable``)."""
    document = dict(usage.document or {})
    return {
        **document,
        "etag": usage.etag,
        "properties": {
            "limit": {"limitObjectType": "LimitValue", "value": usage.limit},
            "name": {"value": usage.name, "localizedValue": localized_name(usage.name)},
            "unit": "Count",
            "currentValue": usage.current,
            "isQuotaApplicable": applicable,
        },
    }


def render_usage(usage: QuotaUsage) -> dict[str, Any]:
    """One entry of a usages list (``limit`` -1: none set)."""
    return {
        "name": {"value": usage.name, "localizedValue": localized_name(usage.name)},
        "currentValue": usage.current,
        "limit": usage.limit if usage.limit is not None else -1,
        "unit": "Count",
    }


class QuotaService:
    """Quota and usage operations over the quota repository; ``nodes`` tells which GPU models a location has."""

    def __init__(self, quotas: QuotaRepository, nodes: NodeRepository, access: Access):
        self._quotas = quotas
        self._nodes = nodes
        self._access = access

    def _models(self, subscription_id: str, location: str) -> set[str]:
        """The accelerator keys of the subscription's nodes in ``location`` (one read of its fleet shapes):
        ``h100`` for H100 GPUs, ``tpu:v5e`` for v5e TPUs."""
        return {s.gpu_model for s in self._nodes.fleet_shapes(subscription_id) if s.location == location}

    @staticmethod
    def _applicable(name: str, models: set[str]) -> bool:
        """Whether a node in the location has what quota ``name`` counts (``gpus`` is always applicable)."""
        return name == ALL_GPUS or any(name in quota_names(model) for model in models)

    # ----------------------------------------------------------------------------------------------- helpers

    @staticmethod
    def _name(name: str) -> str:
        lowered = name.lower()
        if not QUOTA_NAME.match(lowered) or key_of_quota(lowered) is None:
            raise InvalidParameter(
                f"'{name[:80]}' is not an accelerator quota: '{{kind}}s' (every model of a kind: 'gpus', 'tpus', "
                "'npus') or '{kind}s-{model}' (one model, as nodes name it, lower case without spaces: 'gpus-h100', "
                "'gpus-a100-80gb', 'tpus-v5e').",
                target="quotaName",
            )
        return lowered

    def _read(self, ctx: CallContext, subscription_id: str, location: str, name: str = "*") -> None:
        """404 outside the caller's scopes of the subscription, 403 (audited) without the read permission."""
        validate_subscription_id(subscription_id)
        self._access.require_any(
            ctx,
            (rbac.QUOTAS_READ,),
            Target.of_subscription(subscription_id, quota_id(subscription_id, location, name), TYPE, name),
        )

    # ----------------------------------------------------------------------------------------------- reads
    def get(self, ctx: CallContext, subscription_id: str, location: str, name: str) -> dict[str, Any]:
        """A quota; 404 ``ResourceNotFound`` when no limit is set for it (its use is in the usages)."""
        where, quota = parse_location(location), self._name(name)
        self._read(ctx, subscription_id, where, quota)
        usage = self._quotas.get(subscription_id, where, quota)
        if usage is None or usage.limit is None:
            raise ResourceNotFound(f"No accelerator quota '{quota}' is set in '{where}'.")
        return render(usage, self._applicable(quota, self._models(subscription_id, where)))

    def in_location(self, ctx: CallContext, subscription_id: str, location: str) -> list[dict[str, Any]]:
        """The quotas set in a location, by name."""
        where = parse_location(location)
        self._read(ctx, subscription_id, where)
        models = self._models(subscription_id, where)
        return [
            render(u, self._applicable(u.name, models))
            for u in self._quotas.in_location(subscription_id, where)
            if u.limit is not None
        ]

    def usages(self, ctx: CallContext, subscription_id: str, location: str) -> list[dict[str, Any]]:
        """What the subscription holds in a location against every quota in use or limited, and against the quota of
        every kind and model its nodes there have (0 when unused: each name a quota can be set under is listed); ``gpus``
        first, always (0 before any allocation)."""
        where = parse_location(location)
        self._read(ctx, subscription_id, where)
        found = {u.name: u for u in self._quotas.in_location(subscription_id, where)}
        for model in self._models(subscription_id, where):
            for name in quota_names(model):  # its kind's and its model's: each name a limit can be set under
                found.setdefault(name, QuotaUsage(subscription_id, where, name))
        everything = found.pop(ALL_GPUS, None) or QuotaUsage(subscription_id, where, ALL_GPUS)
        return [render_usage(everything), *(render_usage(found[n]) for n in sorted(found))]

    # ----------------------------------------------------------------------------------------------- writes
    def put(
        self,
        ctx: CallContext,
        subscription_id: str,
        location: str,
        name: str,
        body: QuotaWrite,
        *,
        if_match: str | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Set a quota's limit (GPUs). Returns ``(quota, created)``: 201 when no limit was set before, else 200.
        The same limit again writes nothing. 412 on a stale ``If-Match``. Each write is conditioned on the quota as
        read (no limit yet, or its etag), so of racing creates exactly one creates; the others read it again and
        answer as a replace (or as unchanged, for the same limit)."""
        validate_subscription_id(subscription_id)
        where, quota = parse_location(location), self._name(name)
        self._access.require_subscription(ctx, subscription_id, rbac.QUOTAS_WRITE)
        return reattempt(
            lambda: self._put_once(ctx, subscription_id, where, quota, body.properties.limit.value, if_match),
            on=EtagMismatch,
            attempts=WRITE_ATTEMPTS,
            exhausted=lambda: AnotherOperationInProgress(f"The GPU quota '{quota}' kept changing; retry the request."),
        )

    def _put_once(
        self, ctx: CallContext, subscription_id: str, where: str, quota: str, limit: int, if_match: str | None
    ) -> tuple[dict[str, Any], bool]:
        """One read-decide-write of :meth:`put`. Raises ``EtagMismatch`` when, without ``If-Match``, the quota was
        set or changed since it was read (nothing was written)."""
        current = self._quotas.get(subscription_id, where, quota) or QuotaUsage(subscription_id, where, quota)
        held = current.etag if current.limit is not None else None
        arm_rules.check_preconditions(held, if_match=if_match, if_none_match=None)
        if current.limit == limit and current.document is not None:
            return render(current, self._applicable(quota, self._models(subscription_id, where))), False
        document = {
            "id": quota_id(subscription_id, where, quota),
            "name": quota,
            "type": TYPE,
            "systemData": arm_rules.stamp_system_data(ctx, (current.document or {}).get("systemData")),
        }
        changed = QuotaUsage(subscription_id, where, quota, current.current, limit, document, arm_rules.new_etag())
        summary = f"GPU quota {quota} in {where}: {_limit_text(current.limit)} -> {limit}"
        self._set_limit(changed, self._audit(ctx, changed, summary), held, if_match)
        fresh = self._quotas.get(subscription_id, where, quota) or changed
        return render(fresh, self._applicable(quota, self._models(subscription_id, where))), held is None

    def delete(
        self, ctx: CallContext, subscription_id: str, location: str, name: str, *, if_match: str | None = None
    ) -> bool:
        """Remove a quota's limit. False when none was set (ARM RPC: 204). A quota changed meanwhile is read and
        judged again (as :meth:`put`)."""
        validate_subscription_id(subscription_id)
        where, quota = parse_location(location), self._name(name)
        self._access.require_subscription(ctx, subscription_id, rbac.QUOTAS_WRITE)
        return reattempt(
            lambda: self._delete_once(ctx, subscription_id, where, quota, if_match),
            on=EtagMismatch,
            attempts=WRITE_ATTEMPTS,
            exhausted=lambda: AnotherOperationInProgress(f"The GPU quota '{quota}' kept changing; retry the request."),
        )

    def _delete_once(
        self, ctx: CallContext, subscription_id: str, where: str, quota: str, if_match: str | None
    ) -> bool:
        """One read-decide-write of :meth:`delete` (raises as :meth:`_put_once`)."""
        current = self._quotas.get(subscription_id, where, quota)
        if current is None or current.limit is None:
            if if_match is not None:
                arm_rules.check_preconditions(None, if_match=if_match, if_none_match=None)
            return False
        arm_rules.check_preconditions(current.etag, if_match=if_match, if_none_match=None)
        removed = QuotaUsage(subscription_id, where, quota, current.current, None)
        audit = self._audit(ctx, removed, f"GPU quota {quota} in {where}: {current.limit} -> no limit")
        self._set_limit(removed, audit, current.etag, if_match)
        return True

    def _set_limit(self, usage: QuotaUsage, audit: Any, held: str | None, if_match: str | None) -> None:
        """Write the limit conditioned on ``held`` (the etag read; None: no limit was set). A quota changed since
        then is 412 under ``If-Match``; without it, ``EtagMismatch`` propagates: read and judged again."""
        try:
            self._quotas.set_limit(usage, audit, expected_etag=held)
        except EtagMismatch as exc:
            if if_match is not None:
                raise ResourceKernel.write_error(exc, if_match=if_match) from exc
            raise

    @staticmethod
    def _audit(ctx: CallContext, usage: QuotaUsage, summary: str) -> Any:
        return build_event(
            ctx,
            subscription_id=usage.subscription_id,
            action=rbac.QUOTAS_WRITE.name,
            resource_id=quota_id(usage.subscription_id, usage.location, usage.name),
            resource_type=TYPE,
            resource_name=usage.name,
            change_summary=summary,
            new_state=render(usage) if usage.limit is not None else None,
        )


def _limit_text(limit: int | None) -> str:
    return "no limit" if limit is None else str(limit)
