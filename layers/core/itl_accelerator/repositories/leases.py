"""How both lease indexes are read (repositories/dynamodb/operations.py ``DynamoLeaseIndex`` and its in-memory twin):
a page takes a fair share of every partition (``LEASE#{0-3}`` / ``TRACK#{0-3}``) not read to its end, most overdue
first within each, and its token says where each partition's read stands — so no partition's leases, however many
are due, keep another's from being reached (issue 27: the index was read partition by partition, and past about 100
live instances the leases of the later partitions were never checked again).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

from itl_accelerator.repositories.dynamodb.keys import LEASE_SHARDS

#: Where a partition's read stopped: the last item read, as ``(PK, SK, GSI2SK)``.
LastRead = tuple[str, str, str]


@dataclass(frozen=True)
class LeaseRead:
    """A paged read of one kind of lease as of one ``now``: per partition, the last item read (``after``), and the
    partitions read to their end (``done``)."""

    after: dict[int, LastRead] = field(default_factory=dict)
    done: frozenset[int] = frozenset()

    def shares(self, limit: int) -> list[tuple[int, int]]:
        """``(partition, how many to read)`` for a page of ``limit``: an equal share of every partition not done (the
        remainder to the first ones), none empty."""
        active = [s for s in range(LEASE_SHARDS) if s not in self.done]
        if not active:
            return []
        base, extra = divmod(max(1, limit), len(active))
        found = [(s, base + (1 if i < extra else 0)) for i, s in enumerate(active)]
        return [(s, n) for s, n in found if n > 0]

    def advanced(self, shard: int, last: LastRead | None) -> LeaseRead:
        """The read after a page of ``shard`` that stopped at ``last`` (None: it reached the partition's end)."""
        after = dict(self.after)
        if last is None:
            after.pop(shard, None)
            return LeaseRead(after, self.done | {shard})
        after[shard] = last
        return LeaseRead(after, self.done)

    def encode(self) -> str | None:
        """The page token: None once every partition was read to its end."""
        if len(self.done) >= LEASE_SHARDS:
            return None
        body = {"a": {str(s): list(v) for s, v in self.after.items()}, "d": sorted(self.done)}
        return base64.urlsafe_b64encode(json.dumps(body, separators=(",", ":")).encode()).decode()

    @classmethod
    def decode(cls, token: str | None) -> LeaseRead:
        """A read from its token (None: a read from the start). ``ValueError`` for a token not made here."""
        if token is None:
            return cls()
        try:
            body = json.loads(base64.urlsafe_b64decode(token.encode()))
            after = {int(s): (str(v[0]), str(v[1]), str(v[2])) for s, v in body["a"].items()}
            return cls(after, frozenset(int(s) for s in body["d"]))
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise ValueError("not a lease-index token") from exc
