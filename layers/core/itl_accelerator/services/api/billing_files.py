"""A subscription's FOCUS billing file of one UTC day: ``GET .../billingExports/{day}`` — the rows of the day's
export (services/schedules/billing_export.py) that bill the subscription's work and that the caller may see, as the
export billed them (FOCUS 1.2 columns, cells as the file's exact text), page by page.

**What it holds.** The provider writes one FOCUS file a day for the whole fleet (S3, for the provider's finance).
When the export claims a usage record or writes a correction line, it keeps the subscription's part in the
subscription's own partition in the same transaction (repositories: ``bill_entries``); this reads that part — a Query
of the subscription's day, never the fleet's — so a subscription's file is exactly its rows of the day's export: the
usage of the day billed then, then the day's ``Correction`` lines (changes to days already exported). Later changes
never rewrite a day; they go out as corrections in a later day's file, as in the export. So the sum of a day's file
is the day's figure of the cost query *as it stood when the day was exported*, plus the corrections of earlier days.

**Who sees what** is the cost query's rule (services/api/costs.py ``charges_visible_to``; docs/RBAC.md): admins the
subscription's every row, consumers the rows of their own work, suppliers their nodes' earnings — within the
resource groups the caller holds. Needs ``costQuery/action``.

**When.** A day is exported once it has ended (the schedule runs hourly at :30, about 01:30 UTC the next day). Before
that — or for a day exported before per-subscription files existed — 404 ``BillingExportNotFound`` says which.

**Shape** (the cost query's): ``{"id", "name": day, "type", "properties": {"day", "focusVersion", "columns":
[{"name", "type": "String"}], "rows": [[cell, ...]], "nextLink"}}``; a page holds the rows of at most ``$top`` bill
entries (an allocation-hour's price segments, or a correction line's deltas: one or a few rows each), so a page may
hold fewer rows than another, and one without rows may still have a ``nextLink``. Joined in order, the pages are the
file: the CLI (``cost export``) and the portal write them as CSV with the FOCUS header.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.arm import validate_subscription_id
from itl_accelerator.billing.focus import FOCUS_COLUMNS, FOCUS_VERSION, billed_lines, focus_cells
from itl_accelerator.billing.rollup import CostDimensions
from itl_accelerator.domain.usage import USAGE_RETENTION_SECONDS, bill_expires
from itl_accelerator.errors import BillingExportNotFound, InvalidParameter
from itl_accelerator.repositories.protocols import BillingRepository
from itl_accelerator.services.api.costs import charges_visible_to, require_cost_read
from itl_accelerator.services.common.access import Access
from itl_accelerator.services.common.context import CallContext

#: Bill entries per page, by default and at most (each one to a few rows of ~40 cells: a page stays well under
#: Lambda's 6 MB response, ~1.5 MB at the most).
DEFAULT_TOP = MAX_TOP = 500
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
#: An entry key (repositories/dynamodb/keys.py ``bill_usage_sk`` / ``bill_correction_sk``): what a token may hold.
_ENTRY_KEY = re.compile(r"B#[0-9T-]{13}#[0-9a-f]{32}|C#[0-9T-]{13}#[0-9a-f]{32}#[0-9]{4,}")
TYPE = f"{PROVIDER_NAMESPACE}/billingExports"


def parse_day(value: str) -> str:
    """``YYYY-MM-DD``, a real day; 400 ``InvalidParameter`` (target ``day``) otherwise."""
    try:
        if _DAY.fullmatch(value) is None:
            raise ValueError
        return date.fromisoformat(value).isoformat()
    except ValueError:
        shown = value if len(value) <= 20 else value[:20] + "…"
        raise InvalidParameter(f"The day must be a UTC date, YYYY-MM-DD; got '{shown}'.", target="day") from None


def encode_token(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode()).decode().rstrip("=")


def decode_token(token: str) -> str:
    """The entry key a ``$skipToken`` resumes after; 400 ``InvalidParameter`` for a token this API did not give."""
    try:
        key = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        key = ""
    if _ENTRY_KEY.fullmatch(key) is None:
        raise InvalidParameter("The $skipToken is not one this API gave.", target="$skipToken")
    return key


class BillingFileService:
    """Pages of a subscription's billing file of a day (module docstring). ``clock``: epoch seconds."""

    def __init__(self, billing: BillingRepository, access: Access, clock: Callable[[], float]):
        self._billing = billing
        self._access = access
        self._clock = clock

    def page(
        self, ctx: CallContext, subscription_id: str, day: str, skip_token: str | None, top: int | None
    ) -> tuple[dict[str, Any], str | None]:
        """One page and the ``$skipToken`` of the next (None: the last). 400 for a bad day, token or ``$top``;
        404 ``BillingExportNotFound`` for a day not exported (yet); 404 outside the caller's scopes; 403
        (audited) without ``costQuery/action``."""
        validate_subscription_id(subscription_id)
        wanted = parse_day(day)
        require_cost_read(self._access, ctx, subscription_id, "billingExports", wanted)
        resource_id = f"/subscriptions/{subscription_id}/providers/{TYPE}/{wanted}"
        after = decode_token(skip_token) if skip_token else None
        limit = top if top is not None else DEFAULT_TOP
        if not 1 <= limit <= MAX_TOP:
            raise InvalidParameter(f"$top must be from 1 to {MAX_TOP}.", target="$top")
        self._require_exported(wanted)
        entries, last = self._billing.bill_entries(subscription_id, wanted, after, limit)
        sees = charges_visible_to(ctx, subscription_id)
        rows = [
            list(focus_cells(line))
            for entry in entries
            if sees(CostDimensions.of(entry.descriptor))
            for line in billed_lines(
                entry.allocation_id,
                entry.descriptor,
                entry.segments,
                correction_of=entry.window_start if entry.correction else None,
            )
        ]
        body = {
            "id": resource_id,
            "name": wanted,
            "type": TYPE,
            "properties": {
                "day": wanted,
                "focusVersion": FOCUS_VERSION,
                "columns": [{"name": name, "type": "String"} for name in FOCUS_COLUMNS],
                "rows": rows,
                "nextLink": None,
            },
        }
        return body, encode_token(last) if last else None

    def _require_exported(self, day: str) -> None:
        if bill_expires(day) <= self._clock():
            raise BillingExportNotFound(
                f"The billing file of {day} is no longer kept: a day's file is kept {USAGE_RETENTION_SECONDS // 86400} "
                "days; the provider's daily FOCUS export keeps it longer (docs/BILLING.md)."
            )
        state = self._billing.export_day(day)
        if state is None and day < (self._billing.export_cursor() or ""):
            raise BillingExportNotFound(f"No usage was billed on {day}: it is before the first day with usage.")
        if state is None or state.state != "Exported":
            today = datetime.fromtimestamp(self._clock(), UTC).date().isoformat()
            when = (
                "it has not ended yet"
                if day >= today
                else "the export has not reached it yet (a day is exported hourly at :30 once it has ended, about "
                "01:30 UTC the next day)"
            )
            raise BillingExportNotFound(f"The billing file of {day} does not exist yet: {when}.")
        if not state.by_subscription:
            raise BillingExportNotFound(
                f"{day} was exported before billing files per subscription existed: its rows are in the provider's "
                "daily FOCUS export only (docs/BILLING.md)."
            )
