"""The provider's business rules, by kind of caller (layering: functions → api routes → services → repositories and
clients; services never speak HTTP, nor any DynamoDB attribute, index or condition):

- ``api``: what the API routes call — nodes, instances, jobs, operations, subscriptions, audit queries, stats;
- ``workflows``: the Task steps of the Step Functions state machines, with their typed inputs and outputs (io.py);
- ``schedules``: what the EventBridge schedules run — reconciler, job tracker, usage sync, roll-ups, billing export;
- ``streams``: what the table's stream runs — fleet changes;
- ``common``: what several kinds share — access checks, audit events, ARM rules, capacity, placement, meters, LRO
  bodies, the call context.
"""
