"""A job's price ceiling: the most it may be billed at, per GPU-hour, fixed when it is submitted (issue 26).

A job locks its node's terms when it is *placed* (billing/metering.py, "Locked terms"). A job that waits for capacity
is placed later, so without a ceiling a supplier could re-price a node while the job waited (the case that led here:
1,000,000 EUR per GPU-hour with a one-hour minimum, for a 2-second job) and the job would be billed by it. A ceiling
makes a node whose terms exceed it ineligible for the job; the job waits, saying so, until a node within it has room.

The ceiling is a set of :class:`BillingTerms` (at most :data:`MAX_CEILING_TERMS`); a node's terms are *within* a
member (:func:`dominates`) when they have its currency, no higher price per GPU-hour, no higher minimum billable
seconds, and a billing increment that divides the member's (a 45 s increment bills a 50 s run 90 s where a 60 s one
bills 60 s: a smaller increment alone bounds nothing) — so the node bills no run of any length more than the member
would. A member whose increment is :data:`ANY_INCREMENT` (0) bounds the price and the minimum only. Its ``basis``:

- ``MaxPrice`` — the consumer stated it (``properties.maxPrice``: a price per GPU-hour and its currency, as AWS
  Spot's ``MaxPrice`` or a Vast.ai bid; optionally a largest increment and minimum, otherwise any rounding);
- ``PricesAtSubmission`` — the default: the terms of every node the submitter can see (its resource groups, or the
  whole subscription) that could take the job when it was submitted — ``Available``, of its GPU model and location,
  with enough GPUs and GPU memory, in a currency the budgets covering it count — reduced to those no other one
  dominates; when no such node is ``Available``, those of every such node. So a job is never billed at terms worse
  than those of some node its submitter could see and it could have been placed on when it was submitted (the price
  list it accepted by submitting), while a price cut, or a new node at terms within, still serves it — a node in
  another resource group too, when it is within. Why this rule: the consumer does not choose the node (placement
  does, later), so any node it could see and have been placed on then is a price it accepted; a node it cannot see
  is not, nor a cordoned or offline one while an available one could take the job (a supplier parking one at an
  extreme price must not raise every job's ceiling); and it needs one read of the fleet's shapes, not of its nodes.
  A consumer who wants a tighter bound states ``maxPrice``.

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
#: A member's billing increment that bounds nothing (a ``maxPrice`` stating no rounding).
ANY_INCREMENT = 0


class CeilingBasis(StrEnum):
    """Where a job's ceiling came from (module docstring)."""

    MAX_PRICE = "MaxPrice"
    PRICES_AT_SUBMISSION = "PricesAtSubmission"


def dominates(bound: BillingTerms, terms: BillingTerms) -> bool:
    """Whether ``terms`` are within ``bound`` (module docstring): the same currency, no higher price per GPU-hour or
    minimum billable seconds, and an increment dividing ``bound``'s (any, for :data:`ANY_INCREMENT`). Then for every
    run of ``d`` seconds, ``max(min, ceil(d / inc) * inc)`` under ``terms`` is at most that under ``bound``."""
    increment = bound.billing_increment_seconds
    return (
        bound.currency == terms.currency
        and terms.price_per_gpu_hour <= bound.price_per_gpu_hour
        and terms.minimum_billable_seconds <= bound.minimum_billable_seconds
        and (increment == ANY_INCREMENT or increment % max(1, terms.billing_increment_seconds) == 0)
    )


def within(terms: BillingTerms, bounds: tuple[BillingTerms, ...] | None) -> bool:
    """Whether ``terms`` are within one of ``bounds`` (None: no bound)."""
    return bounds is None or any(dominates(b, terms) for b in bounds)


def roughly_within(terms: BillingTerms, bounds: tuple[BillingTerms, ...] | None) -> bool:
    """:func:`within` without the increment's divisibility — what a store's index filter can express (DynamoDB has
    no modulo): a node it passes may still be refused by :func:`within`, never the other way round."""
    return bounds is None or any(
        b.currency == terms.currency
        and terms.price_per_gpu_hour <= b.price_per_gpu_hour
        and terms.minimum_billable_seconds <= b.minimum_billable_seconds
        for b in bounds
    )


def describe_terms(terms: BillingTerms, kind: str = "GPU") -> str:
    """Terms in words, per device-hour of ``kind``: ``2.5 USD per GPU-hour (60 s increments, 60 s minimum)``,
    ``1.2 USD per TPU-hour (...)``."""
    increment = (
        "any increment"
        if terms.billing_increment_seconds == ANY_INCREMENT
        else f"{terms.billing_increment_seconds} s increments"
    )
    price = format(terms.price_per_gpu_hour.normalize(), "f")
    return f"{price} {terms.currency} per {kind}-hour ({increment}, {terms.minimum_billable_seconds} s minimum)"


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
        return within(terms, self.terms)

    def in_currencies(self, currencies: frozenset[str] | None) -> PriceCeiling:
        """The ceiling with only the members in ``currencies`` (None: all): a budget that counts one currency admits
        allocations in that one only (domain/budgets.py)."""
        if currencies is None:
            return self
        return PriceCeiling(self.basis, tuple(t for t in self.terms if t.currency in currencies), self.fixed_at)

    def describe(self, kind: str = "GPU") -> str:
        """The ceiling in words (``3 USD per GPU-hour (60 s increments, 60 s minimum)``, members joined by "or"), per
        device-hour of the job's ``kind``."""
        if not self.terms:
            return "no price (no node could take the job when it was submitted)"
        return " or ".join(describe_terms(t, kind) for t in self.terms)

    def as_properties(self, kind: str = "GPU") -> dict[str, Any]:
        """``properties.priceCeiling`` of a job of accelerator ``kind`` (wire names; prices JSON numbers, as the node's
        pricing: ``pricePerGpuHour`` for a GPU job as always, ``pricePerAcceleratorHour`` for another kind)."""
        name = "pricePerGpuHour" if kind == "GPU" else "pricePerAcceleratorHour"
        return {
            "basis": str(self.basis),
            "fixedAt": self.fixed_at,
            "terms": [
                {
                    name: float(t.price_per_gpu_hour),
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
                    Decimal(str(t.get("pricePerAcceleratorHour", t.get("pricePerGpuHour")))),
                    str(t["currency"]),
                    int(t["billingIncrementSeconds"]),
                    int(t["minimumBillableSeconds"]),
                )
                for t in value.get("terms") or ()
            ),
            str(value.get("fixedAt", "")),
        )
