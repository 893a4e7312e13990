"""A client replaying its booking (ARM's idempotent PUT: a retry after a lost answer, or a GET body sent back, which
models/reservations.py accepts with its read-only properties) gets the reservation as it is (200) — also once its
window has begun, when a replay is most likely (a tool re-applying its desired state at 09:05).

services/api/reservations.py ``book`` answers a booked name (``_again``) before it judges the window (``_ask``)."""

from __future__ import annotations

from tests.services.conftest import RG, SUB, Env
from tests.services.test_reservations import HOUR, NINE, body, book


def test_the_same_booking_again_once_its_window_began_is_200_as_it_is(env: Env, node):
    first, _ = book(env, "week-1", body(8, hours=4))
    env.clock.set(NINE + HOUR)
    again, created = book(env, "week-1", body(8, hours=4))
    assert not created and again["etag"] == first["etag"] and again["properties"]["state"] == "Active"


def test_the_same_booking_again_before_its_window_is_200_as_it_is(env: Env, node):
    first, _ = book(env, "week-1", body(8, hours=4))
    again, created = book(env, "week-1", body(8, hours=4))
    assert not created and again["etag"] == first["etag"] and again["properties"]["state"] == "Scheduled"
    assert env.w.reservations.get(env.consumer(), SUB, RG, "week-1")["etag"] == first["etag"]
