"""What the limits cost: the DynamoDB requests a quota and a budget add to an instance create, and the requests,
data and time of a cost query over 30 days of 1,000 resources.

Run from the repository root: ``python -m benchmarks.limits [--resources 1000] [--days 30]`` (``./dev bench`` runs
it too). Everything goes through the API Gateway emulator of template.yaml in front of the real handlers on moto
(benchmarks/requests_and_cold_start.py ``local_gateway``), and DynamoDB calls are counted at botocore — only those
made by the API function serving the request (not the workflows it starts, nor the schedules).

(a) An instance create (``PUT .../sparkOllamaInstances/{name}``) in a subscription without a quota, then with
    quotas (``gpus``, ``gpus-h100``) and a budget set: a quota is charged inside the reservation's own
    ``TransactWriteItems`` (goal: no request beyond it); the budget check is one ``Query`` of the subscription's
    budgets, made whether or not one is set (so it shows in every row, not as an addition).
(b) A cost query (``CostQueryService``, what ``POST .../costQuery`` runs) for the last 30 days: total, by resource
    group daily, by resource, by tag for one group. The cost days it reads (one item per resource and day, 24
    hours of charges each, kept for deleted resources too) have the roll-up's own format: one resource-day is
    written through the repository on moto and copied. They are served from memory in DynamoDB's 1 MB pages
    (:class:`PagedTable`): moto's per-request cost would dwarf the function's (over API Gateway's 29 s at 3,000
    items). So the figures are the requests, the data read — which is what DynamoDB charges (read units per 4 KB)
    and what its time grows with — and the function's own time (decoding and summing). A query grouped or filtered
    by resource reads resources x days; every other reads cost groups x days (issue 27), whatever the resources:
    the groups' month items (one per group, its days' totals) and, for a day the period holds only part of, the
    groups' day items (one per group and day, its hours).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from decimal import Decimal
from typing import Any
from unittest import mock

from benchmarks.requests_and_cold_start import ADMIN, TABLE, _table, local_gateway

FIRST_DAY = "2026-10-01"
API_VERSION = "api-version=2026-11-01"


@contextmanager
def api_calls(function_ids: set[str]) -> Iterator[Counter[str]]:
    """Count DynamoDB calls by API name made by the functions ``function_ids`` meanwhile."""
    from botocore.client import BaseClient

    from itl_local.lambda_runtime import current_function

    counts: Counter[str] = Counter()
    original = BaseClient._make_api_call

    def counting(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        if self.meta.service_model.service_name == "dynamodb" and current_function() in function_ids:
            counts[operation_name] += 1
        return original(self, operation_name, api_params)

    with mock.patch.object(BaseClient, "_make_api_call", counting):
        yield counts


def _item_size(item: dict[str, Any]) -> int:
    """DynamoDB's size of an item (typed values): attribute names plus values, near enough (UTF-8 lengths)."""
    size = 0
    for name, value in item.items():
        size += len(name.encode())
        ((kind, raw),) = value.items()
        size += len(json.dumps(raw).encode()) if kind in ("M", "L") else len(str(raw).encode())
    return size


def _calls(counts: Counter[str]) -> str:
    return ", ".join(f"{n} {name}" for name, n in sorted(counts.items()) if n) or "none"


# ------------------------------------------------------------------------------------------------ (a) create
def measure_creates(client: Any, token_for: Callable[..., str]) -> list[list[str]]:
    """Rows ``[case, status, DynamoDB calls, extra vs no limit]`` for instance creates without and with limits."""
    sub = f"sub-bench-{uuid.uuid4().hex[:8]}"
    auth = {"Authorization": f"Bearer {token_for('bench-admin', [ADMIN], [f'/subscriptions/{sub}'])}"}
    provider = f"/subscriptions/{sub}/providers/ITL.Accelerator"
    node = f"/subscriptions/{sub}/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1"
    node_body = {
        "location": "us-east-1",
        "sku": {"name": "DGX-H100-8GPU", "capacity": 8},
        "properties": {
            "owner": "bench-supplier",
            "hardwareSpecs": {"gpuModel": "H100", "gpuCount": 8, "gpuMemoryGb": 80},
            "pricing": {"currency": "USD", "pricePerGpuHour": 2.5},
        },
    }
    assert client.put(f"{node}?{API_VERSION}", headers=auth, json=node_body).status_code == 201
    body = {"properties": {"model": "mistral:7b", "gpus": 1, "memoryGb": 80}}
    creates = {"SparkOllamaInstancesCreateOrUpdateFunction", "SparkOllamaInstancesCreateFunction"}
    rows: list[list[str]] = []
    baseline: Counter[str] | None = None

    def create(case: str, name: str) -> None:
        nonlocal baseline
        with api_calls(creates) as counts:
            response = client.put(f"{node}/sparkOllamaInstances/{name}?{API_VERSION}", headers=auth, json=body)
        extra = "-" if baseline is None else _calls(counts - baseline)
        rows.append([case, str(response.status_code), _calls(counts), extra])
        if baseline is None:
            baseline = Counter(counts)

    create("no quota, no budget", "i-1")
    quota = {"properties": {"limit": {"limitObjectType": "LimitValue", "value": 64}}}
    assert client.put(f"{provider}/locations/us-east-1/quotas/gpus?{API_VERSION}", headers=auth,
                      json=quota).status_code in (200, 201)  # fmt: skip
    create("quota 'gpus' set", "i-2")
    quota_h100 = f"{provider}/locations/us-east-1/quotas/gpus-h100?{API_VERSION}"
    assert client.put(quota_h100, headers=auth, json=quota).status_code in (200, 201)
    create("quotas 'gpus' and 'gpus-h100' set", "i-3")
    budget = {"properties": {"amount": "1000", "currency": "USD", "timePeriod": {"startDate": "2026-01-01T00:00:00Z"},
                             "actionAtLimit": "RefuseNewAllocations"}}  # fmt: skip
    assert client.put(f"{provider}/budgets/team?{API_VERSION}", headers=auth, json=budget).status_code == 201
    create("both quotas and a budget set", "i-4")
    return rows


# ------------------------------------------------------------------------------------------------ (b) costs
#: DynamoDB returns at most this much data per Query page.
PAGE_BYTES = 1 << 20


class PagedTable:
    """A DynamoDB stand-in for the cost query's reads: ``query`` answers ``PK = :pk AND SK BETWEEN :a AND :b`` over
    typed items held in memory, in SK order, in pages of at most 1 MB with ``LastEvaluatedKey`` — what DynamoDB
    sends back, without moto's per-request cost (which here exceeds API Gateway's 29 s at 3,000 items). Counts the
    requests and the data read; every other call finds nothing (the subscription is unregistered: ARM's default)."""

    def __init__(self, items: list[dict[str, Any]]):
        self.partitions: dict[str, list[dict[str, Any]]] = {}
        for item in sorted(items, key=lambda i: i["SK"]["S"]):
            self.partitions.setdefault(item["PK"]["S"], []).append(item)
        self.calls: Counter[str] = Counter()
        self.bytes = 0

    def query(self, **request: Any) -> dict[str, Any]:
        self.calls["Query"] += 1
        values = request["ExpressionAttributeValues"]
        if ":m" in values:  # begins_with(SK, :m)
            low, high = values[":m"]["S"], values[":m"]["S"] + "\uffff"
        else:
            low, high = values[":a"]["S"], values[":b"]["S"]
        after = request.get("ExclusiveStartKey", {}).get("SK", {}).get("S", "")
        page: list[dict[str, Any]] = []
        size = 0
        for item in self.partitions.get(values[":pk"]["S"], []):
            sk = item["SK"]["S"]
            if not (low <= sk <= high) or (after and sk <= after):
                continue
            page.append(item)
            size += _item_size(item)
            if size >= PAGE_BYTES:
                self.bytes += size
                return {"Items": page, "LastEvaluatedKey": {"PK": item["PK"], "SK": item["SK"]}}
        self.bytes += size
        return {"Items": page}

    def get_item(self, **request: Any) -> dict[str, Any]:
        self.calls["GetItem"] += 1
        key = request["Key"]
        found = [i for i in self.partitions.get(key["PK"]["S"], []) if i["SK"] == key["SK"]]
        return {"Item": found[0]} if found else {}

    def __getattr__(self, name: str) -> Callable[..., dict[str, Any]]:
        def other(**_: Any) -> dict[str, Any]:
            self.calls[name] += 1
            return {}

        return other


#: How the benchmark's resources spread over the dimensions a cost group is made of: resource ``r`` is in resource
#: group ``rg-{r % 10}``, submitted by ``user-{r % 20}`` and runs on node ``dgx-{r % 50}`` (its supplier
#: ``sup-{r % 5}``) — 100 cost groups a day, whatever the number of resources past 100.
GROUPS = 100


def _dimensions(r: int) -> dict[str, str]:
    return {"resourceGroup": f"rg-{r % 10}", "submittedBy": f"user-{r % 20}", "nodeId": f"dgx-{r % 50}",
            "supplier": f"sup-{r % 5}"}  # fmt: skip


def cost_day_items(sub: str, resources: int, days: int) -> list[dict[str, Any]]:
    """``resources`` jobs x ``days`` days of cost items in ``sub``, 24 charged hours each, as the roll-up writes them:
    each resource's day items, and each cost group's day and month items. One of each is written through the
    repository on moto, the rest are copies of it."""
    import boto3
    from moto import mock_aws

    from itl_accelerator.billing.rollup import (
        CostDimensions,
        CostHour,
        Totals,
        cost_group_scope,
        group_dimensions,
        resource_scope,
    )
    from itl_accelerator.repositories.dynamodb.keys import (
        COST_GROUPS_PK,
        COST_GROUPS_SINCE_SK,
        cost_group_pk,
        cost_pk,
    )
    from itl_accelerator.repositories.dynamodb.table import Table
    from itl_accelerator.repositories.dynamodb.usage import DynamoUsageRepository
    from itl_local.aws import create_table
    from itl_local.template import Template

    with mock_aws():
        db = boto3.client("dynamodb", region_name="us-east-1")
        create_table(db, Template(), TABLE)
        dims = CostDimensions(
            resource_scope="TEMPLATE", resource_id="TEMPLATE", resource_name="job-0",
            resource_type="ITL.Accelerator/sparkJobs", resource_group="rg-0", submitted_by="user-0", node_id="dgx-0",
            supplier="sup-0", tags=(("team", "nlp"),),
        )  # fmt: skip
        hour = Totals()
        hour.add_record(7200, 7200, {"USD": Decimal("4.800000")}, None)  # 2 GPUs for the hour at 2.40 USD/GPU-h
        repo = DynamoUsageRepository(Table(db, TABLE))
        repo.put_cost_hours([CostHour(sub, f"{FIRST_DAY}T{h:02d}", dims, hour, ttl=2_000_000_000) for h in range(24)])
        group = group_dimensions(dims)
        repo.put_cost_group_hours(
            [CostHour(sub, f"{FIRST_DAY}T{h:02d}", group, hour, ttl=2_000_000_000) for h in range(24)]
        )
        stored = db.scan(TableName=TABLE)["Items"]
    (item,) = [i for i in stored if i.get("entityType", {}).get("S") == "CostDay"]
    (group_day,) = [i for i in stored if i.get("entityType", {}).get("S") == "CostGroupDay"]
    (group_month,) = [i for i in stored if i.get("entityType", {}).get("S") == "CostGroupMonth"]
    items = []
    months: dict[tuple[str, str], dict[str, Any]] = {}
    for day in _days(days):
        groups: set[str] = set()
        for r in range(resources):
            rg = f"rg-{r % 10}"
            rid = f"/subscriptions/{sub}/resourceGroups/{rg}/providers/ITL.Accelerator/sparkJobs/job-{r}"
            copy = dict(item)
            copy["PK"] = {"S": cost_pk(sub, day[:7])}
            copy["SK"] = {"S": f"{day}#{resource_scope(rid, '2026-09-30T00:00:00Z')}"}
            copy["resourceId"], copy["resourceName"] = {"S": rid}, {"S": f"job-{r}"}
            copy |= {name: {"S": value} for name, value in _dimensions(r).items()}
            items.append(copy)
            values = _dimensions(r)
            scope = cost_group_scope(
                CostDimensions(
                    "",
                    "",
                    "",
                    dims.resource_type,
                    values["resourceGroup"],
                    values["submittedBy"],
                    values["nodeId"],
                    values["supplier"],
                    dims.tags,
                )
            )
            if scope in groups:
                continue  # one group item a day holds all its resources' charges (the benchmark's are alike)
            groups.add(scope)
            copy = dict(group_day) | {name: {"S": value} for name, value in values.items()}
            copy["PK"] = {"S": cost_group_pk(sub, day[:7])}
            copy["SK"] = {"S": f"D#{day}#{scope}"}
            items.append(copy)
            month = months.get((day[:7], scope))
            if month is None:
                month = months[(day[:7], scope)] = {
                    name: value for name, value in group_month.items() if not name[1:].isdigit()
                } | {name: {"S": value} for name, value in values.items()}
                month["PK"] = {"S": cost_group_pk(sub, day[:7])}
                month["SK"] = {"S": f"M#{scope}"}
            month[f"d{day[8:10]}"] = group_month[f"d{FIRST_DAY[8:10]}"]
            month[f"r{day[8:10]}"] = group_month[f"r{FIRST_DAY[8:10]}"]
    # every hour of the benchmark's days was rolled up with its cost groups (services/api/costs.py reads them)
    since = {"PK": {"S": COST_GROUPS_PK}, "SK": {"S": COST_GROUPS_SINCE_SK}, "hour": {"S": "2026-09-01T00"}}
    return [*items, *months.values(), since]


def _days(count: int) -> list[str]:
    first = date.fromisoformat(FIRST_DAY)
    return [(first + timedelta(days=n)).isoformat() for n in range(count)]


def measure_cost_queries(resources: int, days: int) -> list[list[str]]:
    """Rows ``[query, rows answered, DynamoDB requests, data read, function time]``: the cost query service over
    :class:`PagedTable` (an admin's query; median of 3 runs)."""
    from itl_accelerator.auth.principal import ArmScope, Principal
    from itl_accelerator.models.costs import CostQuery
    from itl_accelerator.services.common.context import CallContext
    from itl_accelerator.settings import Settings
    from itl_accelerator.wiring import Wiring

    sub = "sub-bench-costs"
    items = cost_day_items(sub, resources, days)
    last_day = _days(days)[-1]
    last = date.fromisoformat(last_day) + timedelta(days=1)
    whole = {"from": f"{FIRST_DAY}T00:00:00Z", "to": f"{last.isoformat()}T00:00:00Z"}
    to_date = {"from": f"{FIRST_DAY}T00:00:00Z", "to": f"{last_day}T15:20:00Z"}
    admin = Principal(subject="finance", roles=[ADMIN], scopes=[ArmScope(subscription_id=sub)])
    cases = {
        "month to date (to 15:20 of the last day), total": ({"granularity": "None"}, to_date),
        "total, no grouping": {"granularity": "None"},
        "by supplier, daily": {"granularity": "Daily", "grouping": [{"type": "Dimension", "name": "Supplier"}]},
        "by resource group, daily": {"granularity": "Daily", "grouping": [{"type": "Dimension", "name": "ResourceGroupName"}]},
        "by resource": {"granularity": "None", "grouping": [{"type": "Dimension", "name": "ResourceId"}]},
        "by tag 'team', monthly, one resource group": {
            "granularity": "Monthly",
            "grouping": [{"type": "TagKey", "name": "team"}],
            "filter": {"dimensions": {"name": "ResourceGroupName", "operator": "In", "values": ["rg-3"]}},
        },
    }  # fmt: skip
    rows: list[list[str]] = []
    for label, case in cases.items():
        dataset, period = case if isinstance(case, tuple) else (case, whole)
        query = CostQuery.model_validate(
            {"type": "ActualCost", "timeframe": "Custom", "timePeriod": period, "dataset": dataset}
        )
        times, table = [], PagedTable(items)
        for _ in range(3):
            table = PagedTable(items)
            wiring = Wiring.build(Settings(table_name=TABLE), dynamodb_client=table)
            ctx = CallContext(principal=admin, request_id="bench", correlation_id="bench")
            started = time.perf_counter()
            answer = wiring.costs.query(ctx, sub, query)
            times.append(time.perf_counter() - started)
        calls = ", ".join(f"{n} {name}" for name, n in sorted(table.calls.items()))
        rows.append([label, f"{len(answer['properties']['rows']):,}", calls, f"{table.bytes / 2**20:.1f} MiB",
                     f"{statistics.median(times):.2f} s"])  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--resources", type=int, default=1000)
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args()
    # the create function needs its workflow's ARN (template.yaml sets it); no state machine runs here, so the
    # start is deferred to the reconciler (state_machines.py start_or_defer), after the request's own writes
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:{}"
    for name in ("PROVISION", "DEPROVISION", "JOB"):
        os.environ.setdefault(f"{name}_STATE_MACHINE_ARN", machine.format(name.lower()))
    with local_gateway() as (client, token_for):
        creates = measure_creates(client, token_for)
    print("(a) DynamoDB requests of an instance create (PUT), by the create function, with limits set or not")
    print(_table(["case", "status", "DynamoDB calls", "added by the limits"], creates, set()))
    print()
    costs = measure_cost_queries(args.resources, args.days)
    print(
        f"(b) A cost query over {args.days} days x {args.resources:,} resources ({args.resources * args.days:,} resource"
    )
    print(f"    days, {GROUPS} cost groups a day): the service over 1 MB pages served from memory; 'time' is the")
    print("    function's own (decoding pages, summing), DynamoDB's own time per page (milliseconds) not included.")
    print(
        "    A query by resource reads resource-days; every other, the groups' month items (and day items of a part day)"
    )
    print(_table(["query", "rows", "DynamoDB requests", "data read", "time"], costs, {1, 3, 4}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
