"""A job's price ceiling: the most it may be billed at, per GPU-hour, fixed when it is submitted (issue 26).

A job locks its node's terms when it is *placed* (billing/metering.py, "Locked terms"). A job that waits for capacity
is placed later, so without a ceiling a supplier could re-price a node while the job waited (the case that led here:
1,000,000 EUR per GPU-hour with a one-hour minimum, for a 2-second job) and the job would be billed by it. A ceiling
makes a node whose terms exceed it ineligible for the job; the job waits, saying so, until a node within it has room.

The ceiling is a set of :class:`BillingTerms` (at most :data:`MAX_CEILING_TERMS`); a node's terms are *within* it
when one member has the node's currency and is no lower on each of price per GPU-hour, billing increment and minimum
billable seconds (so the node bills no allocation of any length more than that member would). Its ``basis``:

- ``MaxPrice`` — the consumer stated it (``properties.maxPrice``: a price per GPU-hour and its currency, as AWS
  Spot's ``MaxPrice`` or a Vast.ai bid; optionally a largest increment and minimum, otherwise any rounding);
- ``PricesAtSubmission`` — the default: the terms of every node of the subscription that could hold the job when it
  was submitted (matching its GPU model, location, GPUs and GPU memory, whatever its availability), reduced to those
  no other one dominates. So a job is never billed at terms worse than those of some node it could have seen when it
  was submitted (the price list it accepted by submitting), while a price cut, or a new node at terms within, still
  serves it. Why this rule rather than, say, the terms of the node best fit at submission: the consumer does not
  choose the node (placement does, later), so any node it could have been placed on is a price it accepted; and it
  needs one read of the fleet's shapes, not of its nodes.

A ceiling with no member (no node could hold the job at submission) admits nothing; such a job is inadmissible
anyway (services/common/placement.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

from itl_accelerator.billing.metering import BillingTerms

#: The most members a ceiling keeps (the highest-priced when more are undominated: never more permissive).
MAX_CEILING_TERMS = 16


class CeilingBasis(StrEnum):
    """Where a job's ceiling came from (module docstring)."""

    MAX_PRICE = "MaxPrice"
    PRICES_AT_SUBMISSION = "PricesAtSubmission"


def dominates(bound: BillingTerms, terms: BillingTerms) -> bool:
    """Whether ``terms`` are within ``bound``: the same currency, and no higher price per GPU-hour, billing increment
    or minimum billable seconds."""
    return (
        bound.currency == terms.currency
        and terms.price_per_gpu_hour <= bound.price_per_gpu_hour
        and terms.billing_increment_seconds <= bound.billing_increment_seconds
        and terms.minimum_billable_seconds <= bound.minimum_billable_seconds
    )


def undominated(terms: Iterable[BillingTerms]) -> tuple[BillingTerms, ...]:
    """The members of ``terms`` no other member dominates (duplicates once), highest price first; at most
    :data:`MAX_CEILING_TERMS`."""
    distinct = sorted(set(terms), key=lambda t: (-t.price_per_gpu_hour, t.currency, -t.billing_increment_seconds))
    kept: list[BillingTerms] = []
    for candidate in distinct:
        if not any(dominates(other, candidate) for other in kept):
            kept = [k for k in kept if not dominates(candidate, k)] + [candidate]
    kept.sort(key=lambda t: (-t.price_per_gpu_hour, t.currency))
    return tuple(kept[:MAX_CEILING_TERMS])


@dataclass(frozen=True)
class PriceCeiling:
    """The most a job may be billed at (module docstring): ``terms`` (none: nothing admits it), its ``basis`` and
    when it was fixed (``fixed_at``, UTC ISO 8601)."""

    basis: CeilingBasis
    terms: tuple[BillingTerms, ...]
    fixed_at: str

    def allows(self, terms: BillingTerms) -> bool:
        """Whether a node billing by ``terms`` may take the job."""
        return any(dominates(bound, terms) for bound in self.terms)

    def in_currencies(self, currencies: frozenset[str] | None) -> PriceCeiling:
        """The ceiling with only the members in ``currencies`` (None: all): a budget that counts one currency admits
        allocations in that one only (domain/budgets.py)."""
        if currencies is None:
            return self
        return PriceCeiling(self.basis, tuple(t for t in self.terms if t.currency in currencies), self.fixed_at)

    def describe(self) -> str:
        """The ceiling in words (``3 USD per GPU-hour (60 s increments, 60 s minimum)``, members joined by "or")."""
        if not self.terms:
            return "no price (no node could hold the job when it was submitted)"
        return " or ".join(
            f"{format(t.price_per_gpu_hour.normalize(), 'f')} {t.currency} per GPU-hour "
            f"({t.billing_increment_seconds} s increments, {t.minimum_billable_seconds} s minimum)"
            for t in self.terms
        )

    def as_properties(self) -> dict[str, Any]:
        """``properties.priceCeiling`` (wire names; prices JSON numbers, as the node's pricing)."""
        return {
            "basis": str(self.basis),
            "fixedAt": self.fixed_at,
            "terms": [
                {
                    "pricePerGpuHour": float(t.price_per_gpu_hour),
                    "currency": t.currency,
                    "billingIncrementSeconds": t.billing_increment_seconds,
                    "minimumBillableSeconds": t.minimum_billable_seconds,
                }
                for t in self.terms
            ],
        }

    @classmethod
    def from_properties(cls, value: dict[str, Any]) -> PriceCeiling:
        """Inverse of :meth:`as_properties`."""
        return cls(
            CeilingBasis(value["basis"]),
            tuple(
                BillingTerms(
                    Decimal(str(t["pricePerGpuHour"])),
                    str(t["currency"]),
                    int(t["billingIncrementSeconds"]),
                    int(t["minimumBillableSeconds"]),
                )
                for t in value.get("terms") or ()
            ),
            str(value.get("fixedAt", "")),
        )
