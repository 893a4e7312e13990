"""Key builders for the single table — the only place key formats are written (the DynamoDB repositories use them).

Every key begins with the (lower-cased) subscription, so no access path crosses tenants. Names are lower-cased in
keys (ARM names match case-insensitively); the casing last supplied lives in the item. ``#`` never occurs in a
validated name, so it is a safe separator. Item types (also documented beside the table in template.yaml):

=================  =============================  ==========================================  ==========================
item               PK                             SK                                          GSI1PK / GSI1SK
=================  =============================  ==========================================  ==========================
Subscription       ``SUB#{sub}#SUBSCRIPTION``     ``SUBSCRIPTION``                            —
SparkNode          ``SUB#{sub}``                  ``NODE#{rg}#{node}``                        —
SparkOllamaInst.   ``SUB#{sub}``                  ``INSTANCE#{rg}#{node}#{instance}``         —
OperationStatus    ``SUB#{sub}``                  ``OP#{operationId}``                        —
AuditEvent         ``SUB#{sub}#AUDIT``            ``{timestamp}#{eventId}``                   ``SUB#{sub}#RES#{resourceId}`` / ``{timestamp}#{eventId}``
Meter (allocation) ``SUB#{sub}``                  ``METER#{allocationId}``                    —  (GSI2: ``METER#{shard}``)
QuotaUsage         ``SUB#{sub}``                  ``QUOTA#{location}#{name}``                 —  (counts GPUs held; its limit)
Rollup             ``SUB#{sub}#ROLLUP#{scope}``   ``{hour}``                                  —
CostDay            ``SUB#{sub}#COST#{month}``     ``{day}#{resource scope}``                  —  (``h00``..``h23``)
BillEntry          ``SUB#{sub}#BILL#{day}``       ``B#{hour}#{digest}`` / ``C#{hour}#{digest}#{seq}``  —  (as exported)
Budget             ``SUB#{sub}``                  ``BUDGET#{name}``                           —  (listed in ``SYS#BUDGETS``)
RateCounter        ``SUB#{sub}#RATE``             ``{kind}#{minute}[#CALLER#{hash}]``         —  (TTL: minutes)
=================  =============================  ==========================================  ==========================

A ``RateCounter`` counts the requests of one kind (``reads``/``writes``) in one UTC minute (``{minute}``:
``YYYY-MM-DDTHH:MM``) of a subscription — of every caller, or of one (``#CALLER#{hash}``: the SHA-256 of its token
subject, so no identity is spelt in a key). Its partition is its own, so IAM can let every API function count
(``SUB#*#RATE``) and write nothing else.

Billing works across tenants by nature (a day's export, an hour's roll-up), so the usage records and the billing
bookkeeping live in *system* partitions (``SYS#...``) that only the scheduled functions write:

=================  =====================================  =================================  ======================
item               PK                                     SK                                 what
=================  =====================================  =================================  ======================
UsageRecord        ``SYS#USAGE#{hour}#{shard}``           ``{allocationId}``                 one allocation, one hour
RollupDue          ``SYS#ROLLUPDUE``                      ``{hour}``                         an hour to roll up
CorrectionDue      ``SYS#CORRECTIONDUE``                  ``{hour}#{allocationId}``          billed usage changed
ExportCursor       ``SYS#EXPORT``                         ``CURSOR``                         first day still open
ExportDay          ``SYS#EXPORT``                         ``DAY#{day}``                      Closed → Exported
CorrectionLine     ``SYS#BILL#{day}``                     ``{hour}#{allocationId}#{seq}``    exported that day
=================  =====================================  =================================  ======================

``{hour}`` is ``YYYY-MM-DDTHH`` (UTC), ``{day}`` ``YYYY-MM-DD``: both sort as time.
"""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime

from itl_accelerator.domain.records import ResourceKey
from itl_accelerator.resources import RESOURCE_TYPES

SEP = "#"

#: Leaf type codes of resource items, by ARM resource type segment (resources.py describes each type once).
TYPE_CODES: dict[str, str] = {segment: t.key_code for segment, t in RESOURCE_TYPES.items()}
#: Parent type segment of child resource types.
PARENT_TYPES: dict[str, str] = {segment: t.parent.segment for segment, t in RESOURCE_TYPES.items() if t.parent}


def subscription_pk(subscription_id: str) -> str:
    """Partition of a subscription's resources and operation statuses."""
    return f"SUB{SEP}{subscription_id.lower()}"


SUBSCRIPTION_SK = "SUBSCRIPTION"


def registration_key(subscription_id: str) -> dict[str, str]:
    """Key of a subscription's registration item, alone in its partition ``SUB#{sub}#SUBSCRIPTION``: IAM's
    ``dynamodb:LeadingKeys`` sees partition keys only, so a partition of its own lets template.yaml grant writing
    registrations (``SUB#*#SUBSCRIPTION``; ``{sub}`` is lower-cased) without any resource item."""
    return {"PK": f"{subscription_pk(subscription_id)}{SEP}{SUBSCRIPTION_SK}", "SK": SUBSCRIPTION_SK}


def placement_partition(subscription_id: str, kind: str = "GPU") -> str:
    """GSI5 partition of a subscription's ``Available`` nodes of one accelerator kind (sorted by free devices: best fit
    first): ``SUB#{sub}#AVAILABLE`` for GPUs — the partition every node had before other kinds existed, so a stored
    GPU node is found where it always was — and ``SUB#{sub}#AVAILABLE#{kind}`` (lower case) for any other kind. A
    placement reads its job's kind only: no TPU node takes a GPU job's place in a page."""
    base = f"SUB{SEP}{subscription_id.lower()}{SEP}AVAILABLE"
    return base if kind.lower() == "gpu" else f"{base}{SEP}{kind.lower()}"


def slurm_nodes_partition(cluster: str) -> str:
    """GSI1 partition of the nodes (of any subscription) that are nodes of Slurm cluster ``cluster``, sorted by their
    Slurm node name: what the node health sweep reads per cluster (services/schedules/node_health.py)."""
    return f"SYS{SEP}SLURM{SEP}{cluster.lower()}"


def owner_token(user_id: str) -> str:
    """A user id as a key part: URL-safe base64 of its UTF-8 (exact for any id — ``+``, ``@``, ``.``, ``#`` —
    and never containing the separator)."""
    return base64.urlsafe_b64encode(user_id.encode()).decode().rstrip("=")


def submitter_partition(subscription_id: str, user_id: str) -> str:
    """GSI3 partition of the jobs one user submitted in a subscription."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}SUBMITTER{SEP}{owner_token(user_id)}"


def node_owner_partition(subscription_id: str, owner: str) -> str:
    """GSI4 partition of the jobs placed on the nodes of one supplier (a node's ``owner``)."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}NODEOWNER{SEP}{owner_token(owner)}"


def preemptible_partition(subscription_id: str, kind: str) -> str:
    """GSI1 partition of a subscription's running jobs of one accelerator kind that may be preempted (sorted by
    ``Job.preemption_order``: lowest priority first)."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}PREEMPTIBLE{SEP}{kind.lower()}"


def pending_partition(subscription_id: str) -> str:
    """GSI4 partition of a subscription's jobs waiting for capacity (sorted by priority, then submission)."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}PENDING"


def operation_sk(operation_id: str) -> str:
    """Sort key of an operation status item (in the subscription's partition)."""
    return f"OP{SEP}{operation_id.lower()}"


def audit_pk(subscription_id: str) -> str:
    """Partition of a subscription's audit events (sorted by time)."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}AUDIT"


def audit_sk(timestamp: str, event_id: str) -> str:
    """Audit sort key: ISO timestamp first so a time range is one ``BETWEEN``."""
    return f"{timestamp}{SEP}{event_id}"


def audit_by_actor_pk(subscription_id: str, actor_id: str) -> str:
    """GSI3 partition of the audit events one actor (a token's subject, or SYSTEM) caused in a subscription."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}AUDITACTOR{SEP}{owner_token(actor_id)}"


def audit_by_resource_pk(subscription_id: str, resource_id: str) -> str:
    """GSI1 partition of the audit events of one resource."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}RES{SEP}{resource_id.lower()}"


def meter_sk(allocation_id: str) -> str:
    """Sort key of a meter (one allocation of GPUs, in its subscription's partition)."""
    return f"METER{SEP}{allocation_id}"


def rollup_pk(subscription_id: str, scope: str) -> str:
    """Partition of the hourly roll-ups of one scope of a subscription: ``SUBSCRIPTION``, ``NODE#{rg}#{node}`` or
    ``RES#{resource id}`` (lower-cased)."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}ROLLUP{SEP}{scope.lower()}"


#: Partitions of the usage records of one hour (records spread by allocation: no hot partition).
USAGE_SHARDS = 4


#: Partitions of the lease index (GSI2 ``LEASE#{shard}`` / ``TRACK#{shard}``): reads take a fair share of each.
LEASE_SHARDS = 4


def lease_shard(pk: str, sk: str) -> int:
    """The lease-index partition of an item (stable: a hash of its key)."""
    return int(hashlib.sha256(f"{pk}#{sk}".encode()).hexdigest(), 16) % LEASE_SHARDS


def lease_sort_key(pk: str, sk: str, until: int) -> str:
    """GSI2 sort key of a lease: ``{leaseUntil:012d}#{PK}#{SK}`` (soonest first; ties by key)."""
    return f"{int(until):012d}#{pk}#{sk}"


def shard_of(value: str, shards: int) -> int:
    """A stable partition number in ``range(shards)`` for ``value`` (a hash of it)."""
    return int(hashlib.sha256(value.encode()).hexdigest(), 16) % shards


def usage_pk(hour: str, shard: int) -> str:
    """Partition of the usage records of one UTC hour (``YYYY-MM-DDTHH``), one shard of it."""
    return f"SYS{SEP}USAGE{SEP}{hour}{SEP}{shard}"


#: The hours due for a roll-up before issue 27 (one partition, one item an hour that every usage write of the hour
#: put): still read, so a mark written before an upgrade is rolled up; nothing writes it now.
ROLLUP_DUE_PK = f"SYS{SEP}ROLLUPDUE"
CORRECTION_DUE_PK = f"SYS{SEP}CORRECTIONDUE"
EXPORT_PK = f"SYS{SEP}EXPORT"
EXPORT_CURSOR_SK = "CURSOR"

#: Shards of the marks every usage write touches (issue 27: no single item on the write path): an hour's roll-up
#: mark (``SYS#ROLLUPDUE#{shard}`` / ``{hour}``) and the copy of the export cursor it checks (``SYS#EXPORT#{shard}``
#: / ``CURSOR``), the shard a hash of the allocation — so a burst of writes spreads over this many items, each far
#: under DynamoDB's 1,000 writes and 3,000 reads a second per item.
WRITE_PATH_SHARDS = 8


def rollup_due_pk(shard: int) -> str:
    """Partition of one shard of the hours due for a roll-up."""
    return f"{ROLLUP_DUE_PK}{SEP}{shard}"


def export_cursor_copy_pk(shard: int) -> str:
    """Partition of one shard's copy of the export cursor (sort key :data:`EXPORT_CURSOR_SK`), written with the
    cursor in the transaction that closes a day."""
    return f"{EXPORT_PK}{SEP}{shard}"


def export_day_sk(day: str) -> str:
    """Sort key of the export state of one UTC day (``YYYY-MM-DD``)."""
    return f"DAY{SEP}{day}"


def correction_lines_pk(day: str) -> str:
    """Partition of the correction lines one day's export carries."""
    return f"SYS{SEP}BILL{SEP}{day}"


def bill_pk(subscription_id: str, day: str) -> str:
    """Partition of a subscription's part of one day's export (``YYYY-MM-DD``): its billed usage and correction
    lines as the export claimed them, which its billing file (``GET .../billingExports/{day}``) reads."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}BILL{SEP}{day}"


def _opaque(allocation_id: str) -> str:
    """A digest standing for an allocation in a key a caller may see (a billing file's ``$skipToken`` holds the last
    key read, which may be another user's entry): its hour, never its id."""
    return hashlib.sha256(allocation_id.encode()).hexdigest()[:32]


def bill_usage_sk(hour: str, allocation_id: str) -> str:
    """Sort key of an allocation-hour's usage billed in the day of its partition: ``B#{hour}#{digest}``."""
    return f"B{SEP}{hour}{SEP}{_opaque(allocation_id)}"


def bill_correction_sk(hour: str, allocation_id: str, seq: int) -> str:
    """Sort key of a correction line of the day of its partition (after every usage entry):
    ``C#{hour}#{digest}#{seq}``."""
    return f"C{SEP}{hour}{SEP}{_opaque(allocation_id)}{SEP}{seq:04d}"


def budget_sk(name: str) -> str:
    """Sort key of a budget (in the subscription's partition)."""
    return f"BUDGET{SEP}{name.lower()}"


#: The system partition listing every budget (``{sub}#{name}``), which the budget monitor pages through.
BUDGETS_PK = f"SYS{SEP}BUDGETS"
#: Where the budget monitor's sweep of ``SYS#BUDGETS`` stopped (SK ``CURSOR``, attribute ``token``).
BUDGET_SWEEP_PK = f"SYS{SEP}BUDGETSWEEP"


def cost_pk(subscription_id: str, month: str) -> str:
    """Partition of a subscription's charges by resource and day in one month (``YYYY-MM``)."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}COST{SEP}{month}"


#: Where the first hour rolled up with its cost groups is recorded (the cost query reads resources before it).
COST_GROUPS_PK = f"SYS{SEP}COSTGROUPS"
COST_GROUPS_SINCE_SK = "SINCE"


def cost_group_pk(subscription_id: str, month: str) -> str:
    """Partition of a subscription's charges by cost group in one month (``YYYY-MM``): ``D#{day}#{group}`` items
    (hours of a day) and ``M#{group}`` items (days of the month)."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}COSTG{SEP}{month}"


def quota_sk(location: str, name: str) -> str:
    """Sort key of a GPU quota's counter (in the subscription's partition): ``QUOTA#{location}#{name}``."""
    return f"QUOTA{SEP}{location.lower()}{SEP}{name.lower()}"


def quota_prefix(location: str) -> str:
    """``begins_with`` prefix of the quota counters of one location."""
    return f"QUOTA{SEP}{location.lower()}{SEP}"


def rate_counter_pk(subscription_id: str) -> str:
    """Partition of a subscription's request counters (``SUB#{sub}#RATE``; ``{sub}`` lower-cased, so no resource,
    audit or roll-up partition ends in ``#RATE``: template.yaml's ``RateCounterPolicy`` grants it alone)."""
    return f"{subscription_pk(subscription_id)}{SEP}RATE"


def caller_hash(subject: str) -> str:
    """A caller's token subject as a key part: the hex SHA-256 of its UTF-8 (fixed length, any subject, and no
    user id written into the key)."""
    return hashlib.sha256(subject.encode()).hexdigest()


def rate_counter_sk(kind: str, window_start: int, caller: str | None = None) -> str:
    """Sort key of a request counter: ``{kind}#{YYYY-MM-DDTHH:MM}`` (the UTC minute starting at ``window_start``,
    epoch seconds) for the subscription's, ``...#CALLER#{caller_hash}`` for one caller's."""
    minute = datetime.fromtimestamp(window_start, UTC).strftime("%Y-%m-%dT%H:%M")
    sk = f"{kind}{SEP}{minute}"
    return f"{sk}{SEP}CALLER{SEP}{caller_hash(caller)}" if caller is not None else sk


def resource_pk(key: ResourceKey) -> str:
    """Partition key of a resource: its subscription's partition."""
    return subscription_pk(key.subscription_id)


def resource_sk(key: ResourceKey) -> str:
    """Sort key of a resource: ``{TYPE}#{rg}#{name}[#{child}]`` lower-cased."""
    parts = [TYPE_CODES[key.type_segment], key.resource_group.lower(), *(n.lower() for n in key.names)]
    return SEP.join(parts)


def item_key(key: ResourceKey) -> dict[str, str]:
    """``{"PK", "SK"}`` of a resource item."""
    return {"PK": resource_pk(key), "SK": resource_sk(key)}


def collection_prefix(type_segment: str, resource_group: str | None, parent_names: tuple[str, ...] = ()) -> str:
    """``begins_with`` prefix for a list: by subscription (``resource_group`` None), by resource group, or under a
    parent. Always ends with the separator so ``rg1`` never matches ``rg10``."""
    parts = [TYPE_CODES[type_segment]]
    if resource_group is not None:
        parts.append(resource_group.lower())
        parts.extend(n.lower() for n in parent_names)
    return SEP.join(parts) + SEP
