"""The single-table DynamoDB store (the only code that talks to DynamoDB), split by item type:

- ``table``: the client and the transaction primitive; ``codec``: item encoding, sizes, continuation tokens;
- ``audit``: the append-only audit trail; ``subscriptions``: registration records;
- ``resources``: resources and their capacity counters (nodes); ``workloads``: instances and jobs, their
  operations, reservations and leases;
- metering: ``meters`` (meters and node price history), ``records`` (a usage record and its time keys), ``usage``
  (usage records and roll-ups; ``UsageStore`` is all of metering), ``billing`` (the export's cursor, claims and
  correction lines);
- ``keys``: every key format; ``errors``: the typed failures services map to ARM errors.

:class:`~itl_accelerator.store.workloads.WorkloadStore` is the whole store (each module adds to the one before).
"""
