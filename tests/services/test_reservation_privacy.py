"""What a consumer learns of other users' work from a blocked booking: that the window is taken on which node, not
the names of another user's jobs or reservations (docs/RBAC.md, "Jobs": of another user's job a consumer may learn
only that a name it tries is taken; another user's reservation answers as a missing one).

services/api/reservations.py ``describe_blocker`` says how many devices work holds and until when, and which windows
other reservations booked — never whose."""

from __future__ import annotations

import json

import pytest

from itl_accelerator.errors import InsufficientCapacity
from tests.services.conftest import Env
from tests.services.test_reservations import HOUR, NINE, body, book


def _said(refused: InsufficientCapacity) -> str:
    return refused.message + json.dumps(refused.details)


def test_a_blocked_booking_does_not_name_another_consumers_job_or_reservation(env: Env, node):
    env.add_node("dgx-2")
    ann, bob = env.consumer("ann"), env.consumer("bob")
    env.submit("anns-secret-train", 8, 640, ctx=ann)  # runs for up to a week on one node
    env.run()
    held = env.job("anns-secret-train").node_key.name
    free = ({"dgx-1", "dgx-2"} - {held}).pop()
    book(env, "anns-launch", body(8, start=NINE + 24 * HOUR, hours=2), ctx=ann)  # on the free node
    with pytest.raises(InsufficientCapacity) as tomorrow:
        book(env, "bobs", body(8, nodes=2), ctx=bob)
    with pytest.raises(InsufficientCapacity) as day_after:
        book(env, "bobs", body(8, start=NINE + 24 * HOUR, hours=2, nodes=2), ctx=bob)
    said = _said(tomorrow.value) + _said(day_after.value)
    assert held in said and free in _said(day_after.value)  # which node blocks it: the point of the answer
    assert "held by running work" in said and "booked by a reservation" in said
    assert "anns-secret-train" not in said and "anns-launch" not in said
