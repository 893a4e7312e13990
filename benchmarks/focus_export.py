"""The FOCUS export writer at daily-export sizes: time, peak memory and rows/s of ``write_focus_csv_gz`` for 100,000
and 1,000,000 charge lines, beside a baseline in the same run — the same rows, already rendered as cells, written
with a plain ``csv.writer`` into ``gzip`` at the same level. Prints one table.

Run from the repository root: ``python -m benchmarks.focus_export`` (a few minutes on a 2-core machine).

The lines are what a day of metering produces: allocations (instances and jobs on 100 nodes of 1, 2, 4 or 8 GPUs,
four prices, two currencies, a few tag sets) times 24 hourly windows, the last window of every tenth allocation
partial; they are built one by one by a generator (``ChargeLine`` construction and its checks are part of the
writer's figure; the "lines only" row is that generator alone). Time is measured without tracing; the peak is
tracemalloc's, in a second run (tracing slows allocation-heavy code several times). Output goes to a sink that
counts bytes, so disk speed is not measured.
"""

from __future__ import annotations

import csv
import gc
import gzip
import io
import itertools
import time
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from benchmarks.requests_and_cold_start import _table
from itl_accelerator.billing.focus import FOCUS_COLUMNS, GZIP_LEVEL, ChargeLine, focus_row, write_focus_csv_gz

SIZES = (100_000, 1_000_000)
DAY = datetime(2025, 1, 31, tzinfo=UTC)
PRICES = (("USD", Decimal("2.50")), ("USD", Decimal("3.10")), ("EUR", Decimal("1.95")), ("USD", Decimal("0.36")))
TAG_SETS: tuple[dict[str, str], ...] = (
    {},
    {"env": "prod", "team": "ml"},
    {"env": "dev", "team": "nlp", "cost-center": "R&D 42"},
    {"env": "prod", "project": "llama-serving", "owner": "zoë@example.com"},
)
#: Distinct rendered rows the baseline cycles through (rendering them is not part of its figure).
BASELINE_POOL = 2_400


class CountingSink:
    """A binary file that keeps nothing and counts bytes."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, data: Any) -> int:
        n = len(memoryview(data).cast("B"))
        self.size += n
        return n

    def flush(self) -> None:
        pass


def charge_lines(count: int) -> Iterator[ChargeLine]:
    """``count`` lines of a day: allocation ``i // 24`` in hourly window ``i % 24``."""
    for i in range(count):
        allocation, hour = divmod(i, 24)
        node = allocation % 100
        devices = (1, 2, 4, 8)[allocation % 4]
        currency, price = PRICES[node % len(PRICES)]
        is_job = allocation % 3 == 0
        seconds = 3600 if hour < 23 or allocation % 10 else 1234
        used = seconds * devices
        billable = -(-seconds // 60) * 60 * devices  # whole minutes, rounded up
        sub, rg = f"sub-{allocation % 7}", f"rg-{allocation % 5}"
        node_id = f"/subscriptions/{sub}/resourceGroups/{rg}/providers/ITL.Accelerator/sparkNodes/dgx-{node}"
        name = f"{'job' if is_job else 'llm'}-{allocation}"
        resource_id = (
            f"/subscriptions/{sub}/resourceGroups/{rg}/providers/ITL.Accelerator/sparkJobs/{name}"
            if is_job
            else f"{node_id}/sparkOllamaInstances/{name}"
        )
        start = DAY + timedelta(hours=hour)
        yield ChargeLine(
            allocation_id=f"alloc-{allocation}",
            subscription_id=sub,
            resource_group=rg,
            resource_id=resource_id,
            resource_name=name,
            resource_type="ITL.Accelerator/sparkJobs" if is_job else "ITL.Accelerator/sparkNodes/sparkOllamaInstances",
            service="jobs" if is_job else "instances",
            node_id=node_id,
            node_name=f"dgx-{node}",
            sku="DGX-H100-8GPU",
            region="eu-central-1" if currency == "EUR" else "us-east-1",
            supplier=f"supplier-{node % 9}",
            window_start=start,
            window_end=start + timedelta(seconds=seconds),
            gpu_seconds=used,
            billable_gpu_seconds=billable,
            price_per_gpu_hour=price,
            currency=currency,
            cost=(Decimal(billable) * price / 3600).quantize(Decimal("0.000001"), ROUND_HALF_UP),
            tags=TAG_SETS[allocation % len(TAG_SETS)],
        )


def rendered_pool() -> list[tuple[str, ...]]:
    """The first :data:`BASELINE_POOL` rows as cells, rendered once, outside any measurement."""
    return [tuple(focus_row(line).values()) for line in charge_lines(BASELINE_POOL)]


def rendered_rows(pool: list[tuple[str, ...]], count: int) -> Iterator[tuple[str, ...]]:
    return itertools.islice(itertools.cycle(pool), count)


def plain_csv_gzip(rows: Iterator[tuple[str, ...]], out: CountingSink) -> int:
    """The baseline: csv.writer into gzip, nothing else."""
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, compresslevel=GZIP_LEVEL, mtime=0) as gz:  # type: ignore[arg-type]
        with io.TextIOWrapper(gz, encoding="utf-8", newline="") as text:
            writer = csv.writer(text)
            writer.writerow(FOCUS_COLUMNS)
            writer.writerows(rows)
    return out.size


def _measure(run: Callable[[], Any]) -> tuple[float, int]:
    """(seconds untraced, tracemalloc peak bytes in a second run)."""
    gc.collect()
    started = time.perf_counter()
    run()
    seconds = time.perf_counter() - started
    gc.collect()
    tracemalloc.start()
    try:
        run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return seconds, peak


def main() -> int:
    rows: list[list[str]] = []
    pool = rendered_pool()
    for count in SIZES:
        sink = CountingSink()
        writer_s, writer_peak = _measure(lambda c=count, s=sink: write_focus_csv_gz(charge_lines(c), s))  # type: ignore[misc]
        size = sink.size // 2  # written twice (timed and traced)
        base_sink = CountingSink()
        base_s, base_peak = _measure(lambda c=count, s=base_sink: plain_csv_gzip(rendered_rows(pool, c), s))  # type: ignore[misc]
        base_size = base_sink.size // 2
        started = time.perf_counter()
        for _ in charge_lines(count):
            pass
        lines_s = time.perf_counter() - started
        rows += [
            [f"{count:,}", "write_focus_csv_gz", f"{writer_s:.2f}", f"{writer_peak / 2**20:.2f}",
             f"{count / writer_s:,.0f}", f"{size / 2**20:.1f}", f"{writer_s / base_s:.1f}x"],
            [f"{count:,}", "baseline: csv.writer + gzip", f"{base_s:.2f}", f"{base_peak / 2**20:.2f}",
             f"{count / base_s:,.0f}", f"{base_size / 2**20:.1f}", "1.0x"],
            [f"{count:,}", "  (lines only: the generator)", f"{lines_s:.2f}", "", f"{count / lines_s:,.0f}", "", ""],
        ]  # fmt: skip
    print("FOCUS export: write_focus_csv_gz vs a plain csv.writer + gzip of the same rows (gzip level 6)")
    print(
        _table(["lines", "writer", "time s", "peak MiB", "rows/s", "gz MiB", "time vs baseline"], rows, {2, 3, 4, 5, 6})
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
