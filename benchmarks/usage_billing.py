"""Roll-up and billing export of usage records at volume: time and peak memory for 100,000 and 1,000,000 records,
beside a plain ``csv``-module write of the same rows in the same run. Prints a table.

Run from the repository root: ``python -m benchmarks.usage_billing [--records 100000,1000000]`` (``./dev bench``
runs it too).

The records are the service's own :class:`~itl_accelerator.domain.usage.UsageRecord` objects, generated one at a
time (1,000 allocations on 20 nodes, one record per allocation per hour, each with one or two price segments), and
fed to the same code the scheduled functions run after their DynamoDB pages:

- **roll-up**: :class:`~itl_accelerator.billing.rollup.HourRollup` per hour, then its items (per resource, per
  subscription, per node), as ``UsageRollups.roll_up`` does;
- **export**: the claimed segments as :class:`~itl_accelerator.billing.focus.ChargeLine` objects (as
  ``BillingExport.lines`` makes them) through :func:`~itl_accelerator.billing.focus.write_focus_csv_gz` into a
  temporary file, as ``BillingExport.export`` does before the upload;
- **baseline**: the same FOCUS rows (``focus_row``) written by ``csv.DictWriter`` into a gzip file: what a plain
  write costs, without the streaming checksum, totals and validation of lines.

Each step runs in a process of its own; memory is that process's peak resident set (``wait4``'s ``ru_maxrss``),
interpreter and imports included (about 60 MiB of it). Flat memory means the peak does not grow with the record
count.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from itertools import pairwise
from typing import Any

from itl_accelerator.billing.focus import FOCUS_COLUMNS, billed_lines, focus_row, write_focus_csv_gz
from itl_accelerator.billing.metering import HOUR
from itl_accelerator.billing.rollup import HourRollup
from itl_accelerator.domain.usage import UsageRecord, hour_key

ALLOCATIONS = 1_000
NODES = 20
START = 1_772_323_200  # 2026-03-01T00:00:00Z


def records(count: int) -> Iterator[UsageRecord]:
    """``count`` usage records, hour by hour, ``ALLOCATIONS`` per hour (one in five with a price change)."""
    for i in range(count):
        hour, allocation = divmod(i, ALLOCATIONS)
        window = START + hour * HOUR
        devices = 1 + allocation % 8
        node = allocation % NODES
        descriptor = {
            "subscriptionId": f"sub-{allocation % 10}",
            "resourceGroup": "rg1",
            "resourceId": f"/subscriptions/sub-{allocation % 10}/resourceGroups/rg1/providers/ITL.Accelerator/"
            f"sparkNodes/dgx-{node}/sparkOllamaInstances/inst-{allocation}",
            "resourceName": f"inst-{allocation}",
            "resourceType": "ITL.Accelerator/sparkNodes/sparkOllamaInstances",
            "service": "instances",
            "nodeResourceGroup": "rg1",
            "nodeName": f"dgx-{node}",
            "nodeId": f"/subscriptions/sub-{allocation % 10}/resourceGroups/rg1/providers/ITL.Accelerator/"
            f"sparkNodes/dgx-{node}",
            "supplier": f"supplier-{node % 4}",
            "region": "westeurope",
            "sku": "DGX-H100-8GPU",
            "gpus": devices,
            "tags": {"team": f"t{allocation % 7}"},
        }
        cuts = [window, window + 1200, window + HOUR] if allocation % 5 == 0 else [window, window + HOUR]
        segments = []
        for a, b in pairwise(cuts):
            price = Decimal("2.40") if a == window else Decimal("2.75")
            used = (b - a) * devices
            segments.append(
                {
                    "start": a,
                    "end": b,
                    "gpuSeconds": used,
                    "billableGpuSeconds": used,
                    "pricePerGpuHour": format(price, "f"),
                    "currency": "USD",
                    "cost": format((used * price / HOUR).quantize(Decimal("0.000001")), "f"),
                }
            )
        metrics = {"gpuUtilizationPercent": 40 + allocation % 50, "gpuMemoryGb": 70.5, "energyWh": 350.25,
                   "requests": allocation % 13, "tokensIn": 120, "tokensOut": 800}  # fmt: skip
        record = UsageRecord(f"alloc-{allocation}", window, descriptor, segments, metrics, True, content_hash="x")
        record.billed = {"day": "2026-03-01", "segments": segments, "hash": "x"}
        yield record


def roll_up(count: int) -> int:
    """Roll up ``count`` records hour by hour; returns the roll-up items made."""
    items = 0
    rollup: HourRollup | None = None
    for record in records(count):
        if rollup is None or rollup.hour != record.hour:
            if rollup is not None:
                items += sum(1 for _ in rollup.rollups(0))
            rollup = HourRollup(hour_key(record.window_start))
        rollup.add(record.descriptor, record.gpu_seconds, record.billable_gpu_seconds, record.costs, record.metrics)
    return items + (sum(1 for _ in rollup.rollups(0)) if rollup else 0)


def lines(count: int) -> Iterator[Any]:
    for record in records(count):
        yield from billed_lines(record.allocation_id, record.descriptor, record.billed["segments"])  # type: ignore[index]


def export(count: int) -> int:
    """The FOCUS export of ``count`` records; returns the bytes written."""
    with tempfile.TemporaryFile() as out:
        return write_focus_csv_gz(lines(count), out).size_bytes


def baseline(count: int) -> int:
    """The same rows through ``csv.DictWriter`` into gzip; returns the bytes written."""
    with tempfile.TemporaryFile() as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            text = _Text(gz)
            writer = csv.DictWriter(text, fieldnames=FOCUS_COLUMNS)
            writer.writeheader()
            for line in lines(count):
                writer.writerow(focus_row(line))
        return raw.tell()


class _Text:
    """A minimal text sink over a binary file (csv writes str)."""

    def __init__(self, binary: Any):
        self._binary = binary

    def write(self, text: str) -> int:
        return self._binary.write(text.encode())


STEPS: dict[str, tuple[Callable[[int], int], str]] = {
    "roll-up (HourRollup)": (roll_up, "items"),
    "export (write_focus_csv_gz)": (export, "bytes"),
    "baseline (csv.DictWriter+gz)": (baseline, "bytes"),
}


def measure(name: str, count: int) -> tuple[float, float, int]:
    """``(seconds, peak RSS MiB, result)`` of one step in a fresh process."""
    child = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.usage_billing", "--one", name, "--records", str(count)],
        stdout=subprocess.PIPE,
        text=True,
    )
    out = child.stdout.read() if child.stdout else ""
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0:
        raise RuntimeError(f"{name} with {count} records failed")
    result = json.loads(out)
    return result["seconds"], usage.ru_maxrss / 1024, result["result"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="100000,1000000", help="comma-separated record counts")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # run one step here (the child process)
    args = parser.parse_args(argv)
    if args.one:
        step, _ = STEPS[args.one]
        started = time.perf_counter()
        result = step(int(args.records))
        print(json.dumps({"seconds": time.perf_counter() - started, "result": result}))
        return 0
    counts = [int(c) for c in args.records.split(",")]
    print("Roll-up and FOCUS export of usage records (each step in its own process)")
    print(f"{'records':>10} {'step':<28} {'seconds':>8} {'records/s':>10} {'peak RSS MiB':>12} {'output':>18}")
    for count in counts:
        for name, (_, unit) in STEPS.items():
            seconds, peak, result = measure(name, count)
            print(f"{count:>10,} {name:<28} {seconds:>8.1f} {count / seconds:>10,.0f} {peak:>12.1f} "
                  f"{result:>12,} {unit}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
