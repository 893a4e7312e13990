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
(b) ``POST .../costQuery`` for the last 30 days grouped by resource group, then by resource, daily: the cost days
    it reads (one item per resource and day, 24 hours of charges each, kept for deleted resources too) are written
    as the roll-up writes them (``put_cost_hours``), one resource-day through the repository and the rest copied
    from its item. Time is moto's in this process — far slower per request than DynamoDB's single-digit
    milliseconds, so read the requests and the data read (each ``Query`` page is at most 1 MB) as the cost, and the
    time outside moto as the function's own work (decoding and summing the days). Requests, data and that time grow
    with resources x days: a query reads every day item of the period (about 2 KiB each), whatever it groups by.
"""

from __future__ import annotations

import argparse
import json
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
    """Count DynamoDB calls by API name made by the functions ``function_ids`` meanwhile (their page sizes too:
    ``counts["bytes"]``, the JSON size of the items returned)."""
    from botocore.client import BaseClient

    from itl_local.lambda_runtime import current_function

    counts: Counter[str] = Counter()
    original = BaseClient._make_api_call

    def counting(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        started = time.perf_counter()
        result = original(self, operation_name, api_params)
        if self.meta.service_model.service_name == "dynamodb" and current_function() in function_ids:
            counts[operation_name] += 1
            counts["bytes"] += sum(_item_size(i) for i in result.get("Items", []))
            counts["us"] += int((time.perf_counter() - started) * 1e6)
        return result

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
    return ", ".join(f"{n} {name}" for name, n in sorted(counts.items()) if name not in ("bytes", "us") and n) or "none"


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
        counts.pop("bytes", None)
        counts.pop("us", None)
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
def seed_cost_days(sub: str, resources: int, days: int) -> int:
    """``resources`` jobs x ``days`` days of cost days in ``sub``, 24 charged hours each; returns the items."""
    import boto3

    from itl_accelerator.billing.rollup import CostDimensions, CostHour, Totals, resource_scope
    from itl_accelerator.repositories.dynamodb.keys import cost_pk
    from itl_accelerator.repositories.dynamodb.table import Table
    from itl_accelerator.repositories.dynamodb.usage import DynamoUsageRepository

    db = boto3.client("dynamodb")
    repo = DynamoUsageRepository(Table(db, TABLE))
    template_dims = CostDimensions(
        resource_scope="TEMPLATE", resource_id="TEMPLATE", resource_name="job-0", resource_type="ITL.Accelerator/sparkJobs",
        resource_group="rg-0", submitted_by="ann", node_id="dgx-0", supplier="sup-0", tags=(("team", "nlp"),),
    )  # fmt: skip
    hour = Totals()
    hour.add_record(7200, 7200, {"USD": Decimal("4.800000")}, None)  # 2 GPUs for the hour at 2.40 USD/GPU-h
    repo.put_cost_hours(
        [CostHour(sub, f"{FIRST_DAY}T{h:02d}", template_dims, hour, ttl=2_000_000_000) for h in range(24)]
    )
    (item,) = db.query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": cost_pk(sub, FIRST_DAY[:7])}},
    )["Items"]
    db.delete_item(TableName=TABLE, Key={"PK": item["PK"], "SK": item["SK"]})
    written = 0
    batch: list[dict[str, Any]] = []
    for day in _days(days):
        for r in range(resources):
            rid = f"/subscriptions/{sub}/resourceGroups/rg-{r % 10}/providers/ITL.Accelerator/sparkJobs/job-{r}"
            copy = dict(item)
            copy["PK"] = {"S": cost_pk(sub, day[:7])}
            copy["SK"] = {"S": f"{day}#{resource_scope(rid, '2026-09-30T00:00:00Z')}"}
            copy["resourceId"], copy["resourceName"] = {"S": rid}, {"S": f"job-{r}"}
            copy["resourceGroup"] = {"S": f"rg-{r % 10}"}
            batch.append({"PutRequest": {"Item": copy}})
            if len(batch) == 25:
                db.batch_write_item(RequestItems={TABLE: batch})
                written, batch = written + len(batch), []
    if batch:
        db.batch_write_item(RequestItems={TABLE: batch})
        written += len(batch)
    return written


def _days(count: int) -> list[str]:
    first = date.fromisoformat(FIRST_DAY)
    return [(first + timedelta(days=n)).isoformat() for n in range(count)]


def measure_cost_queries(client: Any, token_for: Callable[..., str], resources: int, days: int) -> list[list[str]]:
    """Rows ``[query, status, rows answered, DynamoDB calls, data read, time]`` over the seeded cost days."""
    sub = f"sub-bench-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    items = seed_cost_days(sub, resources, days)
    print(
        f"seeded {items:,} cost days ({resources:,} resources x {days} days) in {time.perf_counter() - started:.0f} s"
    )
    auth = {"Authorization": f"Bearer {token_for('bench-finance', [ADMIN], [f'/subscriptions/{sub}'])}"}
    last = _days(days)[-1]
    period = {
        "from": f"{FIRST_DAY}T00:00:00Z",
        "to": f"{(date.fromisoformat(last) + timedelta(days=1)).isoformat()}T00:00:00Z",
    }
    cases = {
        "total, no grouping": {"granularity": "None"},
        "by resource group, daily": {"granularity": "Daily", "grouping": [{"type": "Dimension", "name": "ResourceGroupName"}]},
        "by resource": {"granularity": "None", "grouping": [{"type": "Dimension", "name": "ResourceId"}]},
        "by tag 'team', monthly, one resource group": {
            "granularity": "Monthly",
            "grouping": [{"type": "TagKey", "name": "team"}],
            "filter": {"dimensions": {"name": "ResourceGroupName", "operator": "In", "values": ["rg-3"]}},
        },
    }  # fmt: skip
    rows: list[list[str]] = []
    path = f"/subscriptions/{sub}/providers/ITL.Accelerator/costQuery?{API_VERSION}"
    for label, dataset in cases.items():
        body = {"type": "ActualCost", "timeframe": "Custom", "timePeriod": period, "dataset": dataset}
        with api_calls({"CostsQueryFunction"}) as counts:
            t0 = time.perf_counter()
            response = client.post(path, headers=auth, json=body)
            elapsed = time.perf_counter() - t0
        answer = response.json() if response.status_code == 200 else {}
        answered = len((answer.get("properties") or {}).get("rows") or [])
        data, in_store = counts.pop("bytes", 0), counts.pop("us", 0) / 1e6
        rows.append([label, str(response.status_code), f"{answered:,}", _calls(counts), f"{data / 2**20:.1f} MiB",
                     f"{elapsed - in_store:.2f} s", f"{in_store:.2f} s"])  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--resources", type=int, default=1000)
    parser.add_argument("--days", type=int, default=30)
    args = parser.parse_args()
    with local_gateway() as (client, token_for):
        creates = measure_creates(client, token_for)
        print("(a) DynamoDB requests of an instance create (PUT), by the create function, with limits set or not")
        print(_table(["case", "status", "DynamoDB calls", "added by the limits"], creates, set()))
        print()
        costs = measure_cost_queries(client, token_for, args.resources, args.days)
        print(
            f"(b) POST .../costQuery over {args.days} days x {args.resources:,} resources: requests and data read; time"
        )
        print("    outside DynamoDB (authorizer, function, emulator) and inside it (moto: far slower than DynamoDB)")
        headers = ["query", "status", "rows", "DynamoDB calls", "data read", "time outside", "time in moto"]
        print(_table(headers, costs, {2, 4, 5, 6}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
