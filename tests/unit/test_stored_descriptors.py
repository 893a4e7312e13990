"""Items stored before the billing descriptor was one type read as they did: usage records, claims, correction
lines, bill entries and meters of every shape the descriptor has had give the same charge lines and FOCUS cells.

The descriptor (``descriptor`` on a meter or usage record, ``billed.descriptor`` on a claim, on a correction line
and on a bill entry) is persisted, and the daily FOCUS file and each subscription's billing file are written from
it, so its stored shapes are a contract: commit c8d9ec2's first 14 keys, + ``resourceCreatedAt``/``nodeCreatedAt``
(8532c71), + ``submittedBy`` (65a0f2e), + ``acceleratorKind``/``acceleratorModel`` (a391660), + ``allocationId``/
``attempt`` on a job's later attempt or node part, + ``capacityReservationId`` on a capacity reservation's own
allocation and a job's in it (issue 44) — and on a reservation's claimed descriptor only, the device-seconds jobs in
it used in the hour (``capacityReservationUsedGpuSeconds``, billing/focus.py ``USED_GPU_SECONDS_KEY``). The items below are copied from what the repositories write
(repositories/dynamodb/usage.py ``_usage_put``, meters.py ``meter_start_item``, billing.py) and the expected cells
were read from the code before the descriptor became a type (docs/BILLING.md, "Columns")."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from typing import Any, cast

import pytest

from itl_accelerator.billing.focus import billed_lines, focus_row
from itl_accelerator.domain.usage import BillEntry, Meter
from itl_accelerator.repositories.dynamodb.meters import DynamoMeterRepository, meter_start_item
from itl_accelerator.repositories.dynamodb.usage import record_from_item
from itl_accelerator.services.schedules.billing_export import BillingExport

# --------------------------------------------------------------------------------------------- stored items
#: A usage record item as the usage sync stored it when metering began (commit c8d9ec2: the descriptor's first 14
#: keys, no creation times, submitter, kinds or attempts), billed by an export whose claim kept no descriptor.
FIRST_SHAPE_RECORD: dict[str, Any] = {
    "PK": "SYS#USAGE#2026-03-01T10#3",
    "SK": "op-llama-1",
    "windowStart": 1772359200,
    "descriptor": '{"subscriptionId":"sub-a","resourceGroup":"rg1","resourceId":"/subscriptions/sub-a/resourceGroups/'
    'rg1/providers/ITL.Accelerator/sparkNodes/dgx-1/sparkOllamaInstances/llama","resourceName":"llama",'
    '"resourceType":"ITL.Accelerator/sparkNodes/sparkOllamaInstances","service":"instances","nodeResourceGroup":'
    '"rg1","nodeName":"dgx-1","nodeId":"/subscriptions/sub-a/resourceGroups/rg1/providers/ITL.Accelerator/'
    'sparkNodes/dgx-1","supplier":"supplier-7","region":"eastus","sku":"DGX-H100-8GPU","gpus":2,"tags":{"team":'
    '"ml","cost-center":"R&D, \\"core\\""}}',
    "segments": '[{"start":1772359200,"end":1772361000,"gpuSeconds":3600,"billableGpuSeconds":3600,'
    '"pricePerGpuHour":"2.40","currency":"USD","cost":"2.400000"},{"start":1772361000,"end":1772362800,'
    '"gpuSeconds":3600,"billableGpuSeconds":3600,"pricePerGpuHour":"2.75","currency":"USD","cost":"2.750000"}]',
    "gpuSeconds": 7200,
    "billableGpuSeconds": 7200,
    "cost": "5.150000",
    "currency": "USD",
    "final": True,
    "contentHash": "c0ffee",
    "corrections": 0,
    "billed": '{"day":"2026-03-01","segments":[{"start":1772359200,"end":1772361000,"gpuSeconds":3600,'
    '"billableGpuSeconds":3600,"pricePerGpuHour":"2.40","currency":"USD","cost":"2.400000"},{"start":1772361000,'
    '"end":1772362800,"gpuSeconds":3600,"billableGpuSeconds":3600,"pricePerGpuHour":"2.75","currency":"USD",'
    '"cost":"2.750000"}],"hash":"h1"}',
}

#: A job's record as stored once cost queries existed (commit 65a0f2e: + resourceCreatedAt, nodeCreatedAt,
#: submittedBy; no kinds yet), its last hour billed with the rounding rule, claimed with its descriptor.
SUBMITTER_SHAPE_RECORD: dict[str, Any] = {
    "PK": "SYS#USAGE#2026-03-01T13#1",
    "SK": "op-train-1",
    "windowStart": 1772370000,
    "descriptor": '{"subscriptionId":"sub-b","resourceGroup":"ml","resourceId":"/subscriptions/sub-b/resourceGroups/'
    'ml/providers/ITL.Accelerator/sparkJobs/train-1","resourceName":"train-1","resourceType":'
    '"ITL.Accelerator/sparkJobs","service":"jobs","nodeResourceGroup":"fleet","nodeName":"dgx-9","nodeId":'
    '"/subscriptions/sub-b/resourceGroups/fleet/providers/ITL.Accelerator/sparkNodes/dgx-9","supplier":"acme",'
    '"region":"westeurope","sku":"DGX-A100-8GPU","gpus":4,"tags":{},"resourceCreatedAt":"2026-02-28T09:00:00.000000Z",'
    '"nodeCreatedAt":"2026-01-01T00:00:00.000000Z","submittedBy":"alice"}',
    "segments": '[{"start":1772370000,"end":1772371234,"gpuSeconds":4936,"billableGpuSeconds":5040,'
    '"pricePerGpuHour":"1.9","currency":"EUR","cost":"2.660000"}]',
    "final": True,
    "contentHash": "c0ffee",
    "corrections": 0,
    "billed": '{"day":"2026-03-01","segments":[{"start":1772370000,"end":1772371234,"gpuSeconds":4936,'
    '"billableGpuSeconds":5040,"pricePerGpuHour":"1.9","currency":"EUR","cost":"2.660000"}],"hash":"h2",'
    '"descriptor":{"subscriptionId":"sub-b","resourceGroup":"ml","resourceId":"/subscriptions/sub-b/resourceGroups/'
    'ml/providers/ITL.Accelerator/sparkJobs/train-1","resourceName":"train-1","resourceType":'
    '"ITL.Accelerator/sparkJobs","service":"jobs","nodeResourceGroup":"fleet","nodeName":"dgx-9","nodeId":'
    '"/subscriptions/sub-b/resourceGroups/fleet/providers/ITL.Accelerator/sparkNodes/dgx-9","supplier":"acme",'
    '"region":"westeurope","sku":"DGX-A100-8GPU","gpus":4,"tags":{"phase":"claimed"},"resourceCreatedAt":'
    '"2026-02-28T09:00:00.000000Z","nodeCreatedAt":"2026-01-01T00:00:00.000000Z","submittedBy":"alice"}}',
}

#: Today's shape (since commit a391660, kinds): a TPU job's first attempt, as a descriptor.
KINDS_SHAPE: dict[str, Any] = {
    "subscriptionId": "sub-b",
    "resourceGroup": "ml",
    "resourceId": "/subscriptions/sub-b/resourceGroups/ml/providers/ITL.Accelerator/sparkJobs/tune-2",
    "resourceName": "tune-2",
    "resourceType": "ITL.Accelerator/sparkJobs",
    "service": "jobs",
    "nodeResourceGroup": "fleet",
    "nodeName": "tpu-1",
    "nodeId": "/subscriptions/sub-b/resourceGroups/fleet/providers/ITL.Accelerator/sparkNodes/tpu-1",
    "supplier": "acme",
    "region": "us-central1",
    "sku": "TPU-V5E-8",
    "gpus": 8,
    "tags": {"zeta": "last", "alpha": "zoë"},
    "resourceCreatedAt": "2026-02-28T09:00:00.000000Z",
    "nodeCreatedAt": "2026-01-01T00:00:00.000000Z",
    "submittedBy": "bob",
    "acceleratorKind": "TPU",
    "acceleratorModel": "v5e",
}
#: Today's shape of a later attempt's second node part (+ the job's allocationId and the attempt's number).
ATTEMPT_PART_SHAPE: dict[str, Any] = {
    **KINDS_SHAPE,
    "nodeName": "tpu-2",
    "nodeId": "/subscriptions/sub-b/resourceGroups/fleet/providers/ITL.Accelerator/sparkNodes/tpu-2",
    "allocationId": "op-tune-2",
    "attempt": 2,
}


#: Today's shape of a capacity reservation's own allocation on a node (its meter's descriptor): 8 GPUs booked, billed
#: under the reservations service, its own ARM id as ``capacityReservationId``.
RESERVATION_ID = "/subscriptions/sub-c/resourceGroups/ml/providers/ITL.Accelerator/capacityReservations/week-1"
RESERVATION_SHAPE: dict[str, Any] = {
    "subscriptionId": "sub-c",
    "resourceGroup": "ml",
    "resourceId": RESERVATION_ID,
    "resourceName": "week-1",
    "resourceType": "ITL.Accelerator/capacityReservations",
    "service": "reservations",
    "nodeResourceGroup": "fleet",
    "nodeName": "dgx-3",
    "nodeId": "/subscriptions/sub-c/resourceGroups/fleet/providers/ITL.Accelerator/sparkNodes/dgx-3",
    "supplier": "acme",
    "region": "eastus",
    "sku": "DGX-H100-8GPU",
    "gpus": 8,
    "tags": {},
    "resourceCreatedAt": "2026-02-20T09:00:00.000000Z",
    "nodeCreatedAt": "2026-01-01T00:00:00.000000Z",
    "submittedBy": "carol",
    "acceleratorKind": "GPU",
    "acceleratorModel": "H100",
    "capacityReservationId": RESERVATION_ID,
}
#: Today's shape of a job's first attempt running in that reservation (on its node, 4 GPUs, billed at price 0).
IN_RESERVATION_SHAPE: dict[str, Any] = {
    **RESERVATION_SHAPE,
    "resourceId": "/subscriptions/sub-c/resourceGroups/ml/providers/ITL.Accelerator/sparkJobs/eval-1",
    "resourceName": "eval-1",
    "resourceType": "ITL.Accelerator/sparkJobs",
    "service": "jobs",
    "gpus": 4,
    "capacityReservationId": RESERVATION_ID,
}


def _json(value: Any) -> str:
    """As the repositories store JSON (repositories/dynamodb/codec.py ``to_json``)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_TUNE_HOUR = [{"start": 1772402400, "end": 1772406000, "gpuSeconds": 28800, "billableGpuSeconds": 28800,
               "pricePerGpuHour": "0.1", "currency": "USD", "cost": "0.800000"}]  # fmt: skip
_PART_HOUR = [{"start": 1772407800, "end": 1772409000, "gpuSeconds": 9600, "billableGpuSeconds": 9600,
               "pricePerGpuHour": "0.1", "currency": "USD", "cost": "0.266667"}]  # fmt: skip
#: A TPU job's first attempt (today's shape), its hour claimed with its descriptor.
KINDS_SHAPE_RECORD: dict[str, Any] = {
    "PK": "SYS#USAGE#2026-03-01T22#0",
    "SK": "op-tune-2",
    "windowStart": 1772402400,
    "descriptor": _json(KINDS_SHAPE),
    "segments": _json(_TUNE_HOUR),
    "final": True,
    "contentHash": "c0ffee",
    "billed": _json({"day": "2026-03-01", "segments": _TUNE_HOUR, "hash": "h3", "descriptor": KINDS_SHAPE}),
}
#: The second node part of that job's second attempt (its meter ``op-tune-2.attempt-2.part-2``), 20 minutes.
ATTEMPT_PART_RECORD: dict[str, Any] = {
    "PK": "SYS#USAGE#2026-03-01T23#2",
    "SK": "op-tune-2.attempt-2.part-2",
    "windowStart": 1772406000,
    "descriptor": _json(ATTEMPT_PART_SHAPE),
    "segments": _json(_PART_HOUR),
    "final": True,
    "contentHash": "c0ffee",
    "billed": _json({"day": "2026-03-01", "segments": _PART_HOUR, "hash": "h4", "descriptor": ATTEMPT_PART_SHAPE}),
}
RECORDS = (FIRST_SHAPE_RECORD, SUBMITTER_SHAPE_RECORD, KINDS_SHAPE_RECORD, ATTEMPT_PART_RECORD)

_RESERVED_HOUR = [{"start": 1772395200, "end": 1772398800, "gpuSeconds": 28800, "billableGpuSeconds": 28800,
                   "pricePerGpuHour": "2.50", "currency": "USD", "cost": "20.000000"}]  # fmt: skip
_IN_RESERVATION_HALF_HOUR = [{"start": 1772395200, "end": 1772397000, "gpuSeconds": 7200, "billableGpuSeconds": 7200,
                              "pricePerGpuHour": "0", "currency": "USD", "cost": "0.000000"}]  # fmt: skip
#: The reservation's 20:00 hour, claimed with the 7,200 device-seconds the job in it used then.
RESERVATION_RECORD: dict[str, Any] = {
    "PK": "SYS#USAGE#2026-03-01T20#5",
    "SK": "op-week-1.dgx-3",
    "windowStart": 1772395200,
    "descriptor": _json(RESERVATION_SHAPE),
    "segments": _json(_RESERVED_HOUR),
    "final": True,
    "contentHash": "c0ffee",
    "billed": _json(
        {
            "day": "2026-03-01",
            "segments": _RESERVED_HOUR,
            "hash": "h5",
            "descriptor": {**RESERVATION_SHAPE, "capacityReservationUsedGpuSeconds": 7200},
        }
    ),
}
#: The job's half hour in it (4 GPUs, 20:00-20:30), claimed with its descriptor.
IN_RESERVATION_RECORD: dict[str, Any] = {
    "PK": "SYS#USAGE#2026-03-01T20#1",
    "SK": "op-eval-1",
    "windowStart": 1772395200,
    "descriptor": _json(IN_RESERVATION_SHAPE),
    "segments": _json(_IN_RESERVATION_HALF_HOUR),
    "final": True,
    "contentHash": "c0ffee",
    "billed": _json(
        {"day": "2026-03-01", "segments": _IN_RESERVATION_HALF_HOUR, "hash": "h6", "descriptor": IN_RESERVATION_SHAPE}
    ),
}

#: Correction lines as billing.py stores them (``line``: the record's descriptor as it was and its deltas per
#: price): one queued before lines kept their allocation (no ``allocationId``: billed as ``unknown``), of the first
#: descriptor shape; and a negative one of a later attempt's part.
CORRECTION_ITEMS = (
    {
        "PK": "SYS#CORRECTIONLINES#2026-03-01",
        "SK": "2026-03-01T10#op-llama-1#1",
        "line": '{"windowStart":1772359200,"descriptor":' + FIRST_SHAPE_RECORD["descriptor"] + ',"deltas":[{'
        '"pricePerGpuHour":"2.75","currency":"USD","gpuSeconds":120,"billableGpuSeconds":120,"cost":"0.091667"}]}',
    },
    {
        "PK": "SYS#CORRECTIONLINES#2026-03-01",
        "SK": "2026-03-01T23#op-tune-2.attempt-2.part-2#1",
        "line": _json(
            {
                "windowStart": 1772406000,
                "descriptor": ATTEMPT_PART_SHAPE,
                "allocationId": "op-tune-2.attempt-2.part-2",
                "deltas": [{"pricePerGpuHour": "0.1", "currency": "USD", "gpuSeconds": -800,
                            "billableGpuSeconds": -800, "cost": "-0.022222"}],
            }
        ),
    },
)  # fmt: skip

#: A meter item of the first shape (what ``meter_start_item`` wrote then), and today's of a later attempt's part.
FIRST_SHAPE_METER: dict[str, Any] = {
    "PK": "SUB#sub-a",
    "SK": "METER#op-llama-1",
    "entityType": "meter",
    "descriptor": FIRST_SHAPE_RECORD["descriptor"],
    "gpus": 2,
    "dgxId": "dgx-abc",
    "pricing": '{"pricePerGpuHour":"2.40","currency":"USD","billingIncrementSeconds":60,"minimumBillableSeconds":60}',
    "start": 1772359200,
    "meteredUntil": 1772362800,
}
ATTEMPT_PART_METER: dict[str, Any] = {
    "PK": "SUB#sub-b",
    "SK": "METER#op-tune-2.attempt-2.part-2",
    "entityType": "meter",
    "descriptor": ATTEMPT_PART_RECORD["descriptor"],
    "gpus": 8,
    "dgxId": "",
    "pricing": '{"pricePerGpuHour":"0.1","currency":"USD","billingIncrementSeconds":1,"minimumBillableSeconds":0}',
    "start": 1772407800,
    "end": 1772409000,
    "meteredUntil": 1772409000,
    "settledMonths": ["2026-03"],
}
METERS = {"first shape": FIRST_SHAPE_METER, "attempt part": ATTEMPT_PART_METER}


# ------------------------------------------------------------------------------------------------- helpers
class _Usage:
    """The usage repository's reads the export's lines make, over stored items."""

    def __init__(self, items: tuple[dict[str, Any], ...]):
        self._records = [record_from_item(item) for item in items]

    def hour_records(self, hour: str) -> list[Any]:
        return [r for r in self._records if r.hour == hour]


class _Billing:
    """The billing repository's read of a day's correction lines, over stored items."""

    def __init__(self, items: tuple[dict[str, Any], ...]):
        self._lines = [dict(json.loads(item["line"])) for item in items]

    def correction_lines(self, day: str) -> list[dict[str, Any]]:
        return self._lines


def rows_of(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text.strip() + "\n")))


def assert_cells(actual: list[dict[str, str]], expected: list[dict[str, str]]) -> None:
    """Every expected cell, byte for byte (a column added since may add cells, never change these)."""
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        assert {name: got[name] for name in want} == want


# --------------------------------------------------------------------------------------------------- tests
def test_the_daily_file_bills_records_and_corrections_of_every_stored_shape_with_the_same_cells() -> None:
    # Given usage records claimed and correction lines queued, as stored over the descriptor's history
    export = BillingExport(cast(Any, _Usage(RECORDS)), cast(Any, _Billing(CORRECTION_ITEMS)), None, cast(Any, None))
    # When the day's file is written from them
    lines = list(export.lines("2026-03-01"))
    # Then its cells are what they were
    assert_cells([focus_row(line) for line in lines], rows_of(EXPECTED_FILE))
    # and so are the charge lines: the allocation billed, the attempt, the devices, the tags as claimed
    assert [(c.allocation_id, c.attempt, c.accelerator_kind, c.accelerator_model, c.correction) for c in lines] == [
        ("op-llama-1", 1, "GPU", "", False),
        ("op-llama-1", 1, "GPU", "", False),
        ("op-train-1", 1, "GPU", "", False),
        ("op-tune-2", 1, "TPU", "v5e", False),
        ("op-tune-2", 2, "TPU", "v5e", False),
        ("unknown", 1, "GPU", "", True),
        ("op-tune-2", 2, "TPU", "v5e", True),
    ]
    assert lines[0].tags == {"team": "ml", "cost-center": 'R&D, "core"'}
    assert lines[2].tags == {"phase": "claimed"}  # billed.descriptor, not the record's descriptor now


def test_a_subscriptions_bill_entries_of_every_stored_shape_give_the_daily_files_cells() -> None:
    # Given the bill entries the export kept beside the daily file, as billing.py ``bill_entries`` reads them
    entries = [
        BillEntry(
            key=f"B#{record['SK']}",
            allocation_id=str(record["SK"]),
            window_start=int(record["windowStart"]),
            descriptor=dict(json.loads(record["billed"]).get("descriptor") or json.loads(record["descriptor"])),
            segments=list(json.loads(record["billed"])["segments"]),
        )
        for record in RECORDS
    ]
    line = json.loads(CORRECTION_ITEMS[1]["line"])
    entries.append(
        BillEntry("C#1", line["allocationId"], line["windowStart"], line["descriptor"], line["deltas"], True)
    )
    # When its billing file's rows are made of them (services/api/billing_files.py)
    rows = [
        focus_row(charge)
        for entry in entries
        for charge in billed_lines(
            entry.allocation_id,
            entry.descriptor,
            entry.segments,
            correction_of=entry.window_start if entry.correction else None,
        )
    ]
    # Then they are the daily file's rows, cell for cell
    expected = rows_of(EXPECTED_FILE)
    assert_cells(rows, [*expected[:5], expected[6]])


@pytest.mark.parametrize("shape", sorted(METERS))
def test_meters_stored_in_every_shape_read_and_write_as_before(shape: str) -> None:
    item = METERS[shape]
    want = EXPECTED_METERS[shape]
    # When a stored meter is read
    meter = DynamoMeterRepository._meter(str(item["SK"]), item)
    # Then it is what it was: its allocation, what it bills as, its state
    assert isinstance(meter, Meter)
    assert {name: repr(getattr(meter, name)) for name in want["fields"]} == want["fields"]
    assert meter.node_key.names == tuple(want["node"])
    # and it describes itself on every usage record as it did, key by key and in order (a meter of the first shape
    # with the keys added since, at their defaults)
    assert list(meter.descriptor().items()) == [tuple(pair) for pair in want["descriptor"]]
    # and a meter started like it stores that descriptor, byte for byte
    started = meter_start_item("t", meter)["Update"]["ExpressionAttributeValues"]
    assert want["stored"] in [value.get("S") for value in started.values()]


#: The daily file's rows of those items, as the code wrote them before the descriptor was a type.
EXPECTED_FILE = r'''
BilledCost,BillingAccountId,BillingAccountName,BillingCurrency,BillingPeriodEnd,BillingPeriodStart,ChargeCategory,ChargeClass,ChargeDescription,ChargeFrequency,ChargePeriodEnd,ChargePeriodStart,CommitmentDiscountStatus,ConsumedQuantity,ConsumedUnit,ContractedCost,ContractedUnitPrice,EffectiveCost,InvoiceId,InvoiceIssuerName,ListCost,ListUnitPrice,PricingCategory,PricingQuantity,PricingUnit,ProviderName,PublisherName,RegionId,RegionName,ResourceId,ResourceName,ResourceType,ServiceCategory,ServiceName,ServiceSubcategory,SkuId,SubAccountId,SubAccountName,Tags,x_NodeId,x_NodeName,x_ConsumedGpuSeconds,x_BillableGpuSeconds,x_AllocationId,x_AcceleratorKind,x_AcceleratorModel,x_Attempt
2.400000,/subscriptions/sub-a,,USD,2026-04-01T00:00:00Z,2026-03-01T00:00:00Z,Usage,,GPU time of Ollama instance llama on node dgx-1 (DGX-H100-8GPU),Usage-Based,2026-03-01T10:30:00Z,2026-03-01T10:00:00Z,,1.0,GPU-Hours,2.4,2.40,2.400000,,ITL Accelerator,2.4,2.40,Standard,1.0,GPU-Hours,ITL Accelerator,supplier-7,eastus,eastus,/subscriptions/sub-a/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1/sparkOllamaInstances/llama,llama,ITL.Accelerator/sparkNodes/sparkOllamaInstances,AI and Machine Learning,ITL Accelerator Ollama Instances,Generative AI,DGX-H100-8GPU,/subscriptions/sub-a/resourceGroups/rg1,rg1,"{""cost-center"":""R&D, \""core\"""",""team"":""ml""}",/subscriptions/sub-a/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1,dgx-1,3600,3600,op-llama-1,GPU,,1
2.750000,/subscriptions/sub-a,,USD,2026-04-01T00:00:00Z,2026-03-01T00:00:00Z,Usage,,GPU time of Ollama instance llama on node dgx-1 (DGX-H100-8GPU),Usage-Based,2026-03-01T11:00:00Z,2026-03-01T10:30:00Z,,1.0,GPU-Hours,2.75,2.75,2.750000,,ITL Accelerator,2.75,2.75,Standard,1.0,GPU-Hours,ITL Accelerator,supplier-7,eastus,eastus,/subscriptions/sub-a/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1/sparkOllamaInstances/llama,llama,ITL.Accelerator/sparkNodes/sparkOllamaInstances,AI and Machine Learning,ITL Accelerator Ollama Instances,Generative AI,DGX-H100-8GPU,/subscriptions/sub-a/resourceGroups/rg1,rg1,"{""cost-center"":""R&D, \""core\"""",""team"":""ml""}",/subscriptions/sub-a/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1,dgx-1,3600,3600,op-llama-1,GPU,,1
2.660000,/subscriptions/sub-b,,EUR,2026-04-01T00:00:00Z,2026-03-01T00:00:00Z,Usage,,GPU time of job train-1 on node dgx-9 (DGX-A100-8GPU),Usage-Based,2026-03-01T13:20:34Z,2026-03-01T13:00:00Z,,1.3711111111111,GPU-Hours,2.66,1.9,2.660000,,ITL Accelerator,2.66,1.9,Standard,1.4,GPU-Hours,ITL Accelerator,acme,westeurope,westeurope,/subscriptions/sub-b/resourceGroups/ml/providers/ITL.Accelerator/sparkJobs/train-1,train-1,ITL.Accelerator/sparkJobs,AI and Machine Learning,ITL Accelerator Jobs,Machine Learning,DGX-A100-8GPU,/subscriptions/sub-b/resourceGroups/ml,ml,"{""phase"":""claimed""}",/subscriptions/sub-b/resourceGroups/fleet/providers/ITL.Accelerator/sparkNodes/dgx-9,dgx-9,4936,5040,op-train-1,GPU,,1
0.800000,/subscriptions/sub-b,,USD,2026-04-01T00:00:00Z,2026-03-01T00:00:00Z,Usage,,TPU time (v5e) of job tune-2 on node tpu-1 (TPU-V5E-8),Usage-Based,2026-03-01T23:00:00Z,2026-03-01T22:00:00Z,,8.0,TPU-Hours,0.8,0.1,0.800000,,ITL Accelerator,0.8,0.1,Standard,8.0,TPU-Hours,ITL Accelerator,acme,us-central1,us-central1,/subscriptions/sub-b/resourceGroups/ml/providers/ITL.Accelerator/sparkJobs/tune-2,tune-2,ITL.Accelerator/sparkJobs,AI and Machine Learning,ITL Accelerator Jobs,Machine Learning,TPU-V5E-8,/subscriptions/sub-b/resourceGroups/ml,ml,"{""alpha"":""zoë"",""zeta"":""last""}",/subscriptions/sub-b/resourceGroups/fleet/providers/ITL.Accelerator/sparkNodes/tpu-1,tpu-1,28800,28800,op-tune-2,TPU,v5e,1
0.266667,/subscriptions/sub-b,,USD,2026-04-01T00:00:00Z,2026-03-01T00:00:00Z,Usage,,TPU time (v5e) of job tune-2 on node tpu-2 (TPU-V5E-8),Usage-Based,2026-03-01T23:50:00Z,2026-03-01T23:30:00Z,,2.6666666666667,TPU-Hours,0.2666666666667,0.1,0.266667,,ITL Accelerator,0.2666666666667,0.1,Standard,2.6666666666667,TPU-Hours,ITL Accelerator,acme,us-central1,us-central1,/subscriptions/sub-b/resourceGroups/ml/providers/ITL.Accelerator/sparkJobs/tune-2,tune-2,ITL.Accelerator/sparkJobs,AI and Machine Learning,ITL Accelerator Jobs,Machine Learning,TPU-V5E-8,/subscriptions/sub-b/resourceGroups/ml,ml,"{""alpha"":""zoë"",""zeta"":""last""}",/subscriptions/sub-b/resourceGroups/fleet/providers/ITL.Accelerator/sparkNodes/tpu-2,tpu-2,9600,9600,op-tune-2,TPU,v5e,2
0.091667,/subscriptions/sub-a,,USD,2026-04-01T00:00:00Z,2026-03-01T00:00:00Z,Usage,Correction,Correction: GPU time of Ollama instance llama on node dgx-1 (DGX-H100-8GPU),Usage-Based,2026-03-01T11:00:00Z,2026-03-01T10:00:00Z,,0.0333333333333,GPU-Hours,0.0916666666667,2.75,0.091667,,ITL Accelerator,0.0916666666667,2.75,Standard,0.0333333333333,GPU-Hours,ITL Accelerator,supplier-7,eastus,eastus,/subscriptions/sub-a/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1/sparkOllamaInstances/llama,llama,ITL.Accelerator/sparkNodes/sparkOllamaInstances,AI and Machine Learning,ITL Accelerator Ollama Instances,Generative AI,DGX-H100-8GPU,/subscriptions/sub-a/resourceGroups/rg1,rg1,"{""cost-center"":""R&D, \""core\"""",""team"":""ml""}",/subscriptions/sub-a/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1,dgx-1,120,120,unknown,GPU,,1
-0.022222,/subscriptions/sub-b,,USD,2026-04-01T00:00:00Z,2026-03-01T00:00:00Z,Usage,Correction,Correction: TPU time (v5e) of job tune-2 on node tpu-2 (TPU-V5E-8),Usage-Based,2026-03-02T00:00:00Z,2026-03-01T23:00:00Z,,-0.2222222222222,TPU-Hours,-0.0222222222222,0.1,-0.022222,,ITL Accelerator,-0.0222222222222,0.1,Standard,-0.2222222222222,TPU-Hours,ITL Accelerator,acme,us-central1,us-central1,/subscriptions/sub-b/resourceGroups/ml/providers/ITL.Accelerator/sparkJobs/tune-2,tune-2,ITL.Accelerator/sparkJobs,AI and Machine Learning,ITL Accelerator Jobs,Machine Learning,TPU-V5E-8,/subscriptions/sub-b/resourceGroups/ml,ml,"{""alpha"":""zoë"",""zeta"":""last""}",/subscriptions/sub-b/resourceGroups/fleet/providers/ITL.Accelerator/sparkNodes/tpu-2,tpu-2,-800,-800,op-tune-2,TPU,v5e,2
'''
#: Those meters as read (``repr`` of each field), the descriptor they write and its stored JSON, as before.
EXPECTED_METERS: dict[str, dict[str, Any]] = {
    "first shape": {
        "fields": {
            "allocation_id": "'op-llama-1'",
            "subscription_id": "'sub-a'",
            "resource_group": "'rg1'",
            "resource_id": "'/subscriptions/sub-a/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1/sparkOllamaInstances/llama'",
            "resource_name": "'llama'",
            "resource_type": "'ITL.Accelerator/sparkNodes/sparkOllamaInstances'",
            "service": "'instances'",
            "node_resource_group": "'rg1'",
            "node_name": "'dgx-1'",
            "node_id": "'/subscriptions/sub-a/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1'",
            "supplier": "'supplier-7'",
            "region": "'eastus'",
            "sku": "'DGX-H100-8GPU'",
            "gpus": "2",
            "terms": "BillingTerms(price_per_gpu_hour=Decimal('2.40'), currency='USD', "
            "billing_increment_seconds=60, minimum_billable_seconds=60)",
            "start": "1772359200",
            "end": "None",
            "dgx_id": "'dgx-abc'",
            "tags": "{'team': 'ml', 'cost-center': 'R&D, \"core\"'}",
            "resource_created_at": "''",
            "node_created_at": "''",
            "metered_until": "1772362800",
            "metrics_retry_from": "None",
            "active": "False",
            "submitted_by": "''",
            "settled_months": "frozenset()",
            "accelerator_kind": "'GPU'",
            "accelerator_model": "''",
            "attempt": "1",
            "job_allocation_id": "''",
        },
        "node": ["dgx-1"],
        "descriptor": [
            ["subscriptionId", "sub-a"],
            ["resourceGroup", "rg1"],
            [
                "resourceId",
                "/subscriptions/sub-a/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1/sparkOllamaInstances/llama",
            ],
            ["resourceName", "llama"],
            ["resourceType", "ITL.Accelerator/sparkNodes/sparkOllamaInstances"],
            ["service", "instances"],
            ["nodeResourceGroup", "rg1"],
            ["nodeName", "dgx-1"],
            ["nodeId", "/subscriptions/sub-a/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1"],
            ["supplier", "supplier-7"],
            ["region", "eastus"],
            ["sku", "DGX-H100-8GPU"],
            ["gpus", 2],
            ["tags", {"team": "ml", "cost-center": 'R&D, "core"'}],
            ["resourceCreatedAt", ""],
            ["nodeCreatedAt", ""],
            ["submittedBy", ""],
            ["acceleratorKind", "GPU"],
            ["acceleratorModel", ""],
        ],
        "stored": '{"subscriptionId":"sub-a","resourceGroup":"rg1","resourceId":"/subscriptions/sub-a/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1/sparkOllamaInstances/llama","resourceName":"llama","resourceType":"ITL.Accelerator/sparkNodes/sparkOllamaInstances","service":"instances","nodeResourceGroup":"rg1","nodeName":"dgx-1","nodeId":"/subscriptions/sub-a/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1","supplier":"supplier-7","region":"eastus","sku":"DGX-H100-8GPU","gpus":2,"tags":{"team":"ml","cost-center":"R&D, '
        '\\"core\\""},"resourceCreatedAt":"","nodeCreatedAt":"","submittedBy":"","acceleratorKind":"GPU","acceleratorModel":""}',
    },
    "attempt part": {
        "fields": {
            "allocation_id": "'op-tune-2.attempt-2.part-2'",
            "subscription_id": "'sub-b'",
            "resource_group": "'ml'",
            "resource_id": "'/subscriptions/sub-b/resourceGroups/ml/providers/ITL.Accelerator/sparkJobs/tune-2'",
            "resource_name": "'tune-2'",
            "resource_type": "'ITL.Accelerator/sparkJobs'",
            "service": "'jobs'",
            "node_resource_group": "'fleet'",
            "node_name": "'tpu-2'",
            "node_id": "'/subscriptions/sub-b/resourceGroups/fleet/providers/ITL.Accelerator/sparkNodes/tpu-2'",
            "supplier": "'acme'",
            "region": "'us-central1'",
            "sku": "'TPU-V5E-8'",
            "gpus": "8",
            "terms": "BillingTerms(price_per_gpu_hour=Decimal('0.1'), currency='USD', "
            "billing_increment_seconds=1, minimum_billable_seconds=0)",
            "start": "1772407800",
            "end": "1772409000",
            "dgx_id": "''",
            "tags": "{'zeta': 'last', 'alpha': 'zoë'}",
            "resource_created_at": "'2026-02-28T09:00:00.000000Z'",
            "node_created_at": "'2026-01-01T00:00:00.000000Z'",
            "metered_until": "1772409000",
            "metrics_retry_from": "None",
            "active": "False",
            "submitted_by": "'bob'",
            "settled_months": "frozenset({'2026-03'})",
            "accelerator_kind": "'TPU'",
            "accelerator_model": "'v5e'",
            "attempt": "2",
            "job_allocation_id": "'op-tune-2'",
        },
        "node": ["tpu-2"],
        "descriptor": [
            ["subscriptionId", "sub-b"],
            ["resourceGroup", "ml"],
            ["resourceId", "/subscriptions/sub-b/resourceGroups/ml/providers/ITL.Accelerator/sparkJobs/tune-2"],
            ["resourceName", "tune-2"],
            ["resourceType", "ITL.Accelerator/sparkJobs"],
            ["service", "jobs"],
            ["nodeResourceGroup", "fleet"],
            ["nodeName", "tpu-2"],
            ["nodeId", "/subscriptions/sub-b/resourceGroups/fleet/providers/ITL.Accelerator/sparkNodes/tpu-2"],
            ["supplier", "acme"],
            ["region", "us-central1"],
            ["sku", "TPU-V5E-8"],
            ["gpus", 8],
            ["tags", {"zeta": "last", "alpha": "zoë"}],
            ["resourceCreatedAt", "2026-02-28T09:00:00.000000Z"],
            ["nodeCreatedAt", "2026-01-01T00:00:00.000000Z"],
            ["submittedBy", "bob"],
            ["acceleratorKind", "TPU"],
            ["acceleratorModel", "v5e"],
            ["allocationId", "op-tune-2"],
            ["attempt", 2],
        ],
        "stored": '{"subscriptionId":"sub-b","resourceGroup":"ml","resourceId":"/subscriptions/sub-b/resourceGroups/ml/providers/ITL.Accelerator/sparkJobs/tune-2","resourceName":"tune-2","resourceType":"ITL.Accelerator/sparkJobs","service":"jobs","nodeResourceGroup":"fleet","nodeName":"tpu-2","nodeId":"/subscriptions/sub-b/resourceGroups/fleet/providers/ITL.Accelerator/sparkNodes/tpu-2","supplier":"acme","region":"us-central1","sku":"TPU-V5E-8","gpus":8,"tags":{"zeta":"last","alpha":"zoë"},"resourceCreatedAt":"2026-02-28T09:00:00.000000Z","nodeCreatedAt":"2026-01-01T00:00:00.000000Z","submittedBy":"bob","acceleratorKind":"TPU","acceleratorModel":"v5e","allocationId":"op-tune-2","attempt":2}',
    },
}


# ------------------------------------------------------------------------------------- the descriptor's contract
def test_only_the_fields_metering_began_with_are_required_so_a_new_field_reads_old_items_at_its_default() -> None:
    from dataclasses import fields

    from itl_accelerator.billing.descriptor import REQUIRED_FIELDS, BillingDescriptor
    from itl_accelerator.billing.focus import ChargeLine

    # a field added without a default would make every item stored before it unreadable (KeyError)
    assert REQUIRED_FIELDS == (
        "subscription_id", "resource_group", "resource_id", "resource_name", "resource_type", "service", "node_name",
        "node_id", "supplier", "region", "sku",
    )  # fmt: skip
    # and the meter and the charge line are the descriptor's fields, declared there once
    declared = {f.name for f in fields(BillingDescriptor)}
    assert declared <= {f.name for f in fields(Meter)} and declared <= {f.name for f in fields(ChargeLine)}


@pytest.mark.parametrize(
    "stored",
    [json.loads(FIRST_SHAPE_RECORD["descriptor"]), KINDS_SHAPE, ATTEMPT_PART_SHAPE, RESERVATION_SHAPE,
     IN_RESERVATION_SHAPE],
)  # fmt: skip
def test_a_descriptor_read_then_written_is_todays_shape_and_reads_back_the_same(stored: dict[str, Any]) -> None:
    from itl_accelerator.billing.descriptor import from_stored

    billed = from_stored(stored)
    written = billed.as_stored()
    # today's shape: the stored keys kept with their values, the keys added since at their defaults
    assert {k: v for k, v in written.items() if k in stored} == stored
    assert list(written)[:14] == list(json.loads(FIRST_SHAPE_RECORD["descriptor"]))
    assert ("allocationId" in written) == ("allocationId" in stored)
    assert from_stored(written) == billed


def test_a_reservations_hour_and_a_job_in_it_bill_as_stored() -> None:
    # Given the reservation's hour claimed with what the job in it used, and the job's half hour, as stored
    export = BillingExport(
        cast(Any, _Usage((RESERVATION_RECORD, IN_RESERVATION_RECORD))), cast(Any, _Billing(())), None, cast(Any, None)
    )
    # When the day's file is written from them
    rows = [focus_row(line) for line in export.lines("2026-03-01")]
    # Then the reservation's hour is its used and unused portions, the job's row used and billed nothing
    wanted = ("ResourceName", "ServiceName", "CapacityReservationId", "CapacityReservationStatus", "BilledCost",
              "x_ConsumedGpuSeconds", "ChargeDescription")  # fmt: skip
    assert sorted(tuple(r[c] for c in wanted) for r in rows) == [
        ("eval-1", "ITL Accelerator Jobs", RESERVATION_ID, "Used", "0.000000", "7200",
         "GPU time (H100) of job eval-1 on node dgx-3 (DGX-H100-8GPU) in capacity reservation week-1 (billed by the "
         "reservation)"),
        ("week-1", "ITL Accelerator Capacity Reservations", RESERVATION_ID, "Unused", "15.000000", "21600",
         "GPU time (H100) reserved by capacity reservation week-1 on node dgx-3 (DGX-H100-8GPU), 8 GPUs booked: unused"),
        ("week-1", "ITL Accelerator Capacity Reservations", RESERVATION_ID, "Used", "5.000000", "7200",
         "GPU time (H100) reserved by capacity reservation week-1 on node dgx-3 (DGX-H100-8GPU), 8 GPUs booked: used "
         "by jobs in it"),
    ]  # fmt: skip
    # and a subscription's bill entries of them give the same rows
    entries = [
        BillEntry(f"B#{r['SK']}", str(r["SK"]), int(r["windowStart"]), json.loads(r["billed"])["descriptor"],
                  json.loads(r["billed"])["segments"])
        for r in (RESERVATION_RECORD, IN_RESERVATION_RECORD)
    ]  # fmt: skip
    from_entries = [focus_row(c) for e in entries for c in billed_lines(e.allocation_id, e.descriptor, e.segments)]
    assert sorted(map(str, from_entries)) == sorted(map(str, rows))


def test_a_reservations_meter_stores_its_id_and_its_end_from_its_start() -> None:
    from itl_accelerator.billing.descriptor import from_stored
    from itl_accelerator.billing.metering import BillingTerms

    meter = Meter(
        **from_stored(RESERVATION_SHAPE).billed_fields(),
        allocation_id="op-week-1.dgx-3",
        terms=BillingTerms(price_per_gpu_hour=Decimal("2.50"), currency="USD"),
        start=1772388000,
        end=1772398800,
    )
    values = meter_start_item("t", meter)["Update"]["ExpressionAttributeValues"]
    stored = [v.get("S") for v in values.values()]
    assert _json(RESERVATION_SHAPE) in stored  # the descriptor, byte for byte, capacityReservationId last
    assert {"N": "1772398800"} in values.values()  # its end, known from its start
