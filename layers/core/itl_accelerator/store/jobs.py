"""Jobs' own access paths, beside what every workload has (store/workloads.py):

- one user's jobs: GSI3 (``GSI3PK = SUB#{sub}#SUBMITTER#{user}``, ``GSI3SK = {rg}#{name}``) — the seed's
  ``?submitted_by=``, and a consumer's own list, with full pages (no filter);
- the jobs placed on one supplier's nodes: GSI4 (``GSI4PK = SUB#{sub}#NODEOWNER#{owner}``);
- the jobs waiting for capacity, in the order placement serves them: GSI4 (``GSI4PK = SUB#{sub}#PENDING``,
  ``GSI4SK = {9 - priority}#{submittedAt}#{rg}#{name}``) — a job is either pending or placed, never both;
- the nodes that could take a job now, best fit first: GSI5 (``GSI5PK = SUB#{sub}#AVAILABLE`` while a node is
  Available, sort key ``gpuFree``).

Indexes are eventually consistent; none of them decides anything: a placement is judged by the conditional
reservation on the node item, and a job's state by its item.
"""

from __future__ import annotations

from typing import Any

from itl_accelerator.store import keys
from itl_accelerator.store.codec import plain, typed
from itl_accelerator.store.keys import ResourceKey
from itl_accelerator.store.resources import IndexView, StoredResource
from itl_accelerator.store.workloads import WorkloadStore

#: Candidate nodes read per placement attempt (one page of GSI5), and the most pages read for one job.
CANDIDATE_PAGE = 25
MAX_CANDIDATE_PAGES = 2


def submitter_view(subscription_id: str, user_id: str) -> IndexView:
    """The jobs ``user_id`` submitted in a subscription (GSI3)."""
    return IndexView(keys.submitter_partition(subscription_id, user_id), "GSI3PK", "GSI3SK", "GSI3")


def node_owner_view(subscription_id: str, owner: str) -> IndexView:
    """The jobs placed on the nodes whose ``owner`` is ``owner`` (GSI4)."""
    return IndexView(keys.node_owner_partition(subscription_id, owner), "GSI4PK", "GSI4SK", "GSI4")


def pending_sort_key(priority: int, submitted_at: str, key: ResourceKey) -> str:
    """GSI4 sort key of a pending job: higher priority first, then earlier submission (ISO times sort as text)."""
    return keys.SEP.join([str(9 - priority), submitted_at, key.resource_group.lower(), key.names[-1].lower()])


def job_index_values(key: ResourceKey, *, submitted_by: str) -> dict[str, str]:
    """The GSI3 attributes of a job (by submitter; set once, at submission)."""
    return {
        "GSI3PK": keys.submitter_partition(key.subscription_id, submitted_by),
        "GSI3SK": f"{key.resource_group.lower()}{keys.SEP}{key.names[-1].lower()}",
    }


def pending_index_values(key: ResourceKey, *, priority: int, submitted_at: str) -> dict[str, str]:
    """The GSI4 attributes of a job waiting for capacity."""
    return {
        "GSI4PK": keys.pending_partition(key.subscription_id),
        "GSI4SK": pending_sort_key(priority, submitted_at, key),
    }


def placed_index_values(key: ResourceKey, *, node_owner: str) -> dict[str, str]:
    """The GSI4 attributes of a job placed on a node of ``node_owner``."""
    return {
        "GSI4PK": keys.node_owner_partition(key.subscription_id, node_owner),
        "GSI4SK": f"{key.resource_group.lower()}{keys.SEP}{key.names[-1].lower()}",
    }


class JobStore(WorkloadStore):
    """:class:`WorkloadStore` plus the job and placement access paths (module docstring). The whole store."""

    def pending_jobs(self, subscription_id: str, limit: int) -> list[ResourceKey]:
        """Keys of up to ``limit`` jobs waiting for capacity, in placement order. One ``Query`` (GSI4)."""
        response = self._db.query(
            TableName=self._table,
            IndexName="GSI4",
            KeyConditionExpression="GSI4PK = :p",
            ExpressionAttributeValues=typed({":p": keys.pending_partition(subscription_id)}),
            Limit=limit,
        )
        return [self._key_of(plain(i), subscription_id, "sparkJobs") for i in response.get("Items", [])]

    def free_nodes(
        self,
        subscription_id: str,
        *,
        gpus: int,
        memory_gb: int,
        gpu_model: str = "",
        location: str = "",
        job: str | None = None,
    ) -> tuple[list[StoredResource], int]:
        """``Available`` nodes with at least ``gpus`` free GPUs and ``memory_gb`` free GiB, matching the job's
        ``gpu_model``/``location`` (when given) and not drained for another job, least free GPUs first (best fit).
        Reads at most :data:`MAX_CANDIDATE_PAGES` pages of GSI5 (constant, whatever the fleet size). Returns
        ``(nodes, queries made)``."""
        conditions = ["memoryGbFree >= :m", "(attribute_not_exists(drainingFor) OR drainingFor = :job)"]
        values: dict[str, Any] = {
            ":p": keys.placement_partition(subscription_id),
            ":g": gpus,
            ":m": memory_gb,
            ":job": job or "-",
        }
        names: dict[str, str] = {}
        if gpu_model:
            conditions.append("gpuModelKey = :model")
            values[":model"] = gpu_model
        if location:
            conditions.append("#loc = :loc")
            names["#loc"] = "location"
            values[":loc"] = location
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": "GSI5",
            "KeyConditionExpression": "GSI5PK = :p AND gpuFree >= :g",
            "FilterExpression": " AND ".join(conditions),
            "ExpressionAttributeValues": typed(values),
            "Limit": CANDIDATE_PAGE,
        }
        if names:
            request["ExpressionAttributeNames"] = names
        found: list[StoredResource] = []
        queries = 0
        while queries < MAX_CANDIDATE_PAGES:
            response = self._db.query(**request)
            queries += 1
            for item in map(plain, response.get("Items", [])):
                found.append(self._resource_from_item(self._key_of(item, subscription_id, "sparkNodes"), item))
            if found or "LastEvaluatedKey" not in response:
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return found, queries

    def set_draining(self, node: ResourceKey, job_sk: str | None) -> None:
        """Mark ``node`` as drained for the job ``job_sk`` (no other job is placed there until that one is), or
        (None) end the drain. Bookkeeping of placement, not a change of the node's resource (no audit item)."""
        update: dict[str, Any] = {
            "TableName": self._table,
            "Key": typed({"PK": node.pk, "SK": node.sk}),
            "ConditionExpression": "attribute_exists(PK)",
        }
        if job_sk:
            update["UpdateExpression"] = "SET drainingFor = :job"
            update["ExpressionAttributeValues"] = typed({":job": job_sk})
        else:
            update["UpdateExpression"] = "REMOVE drainingFor"
        try:
            self._db.update_item(**update)
        except self._db.exceptions.ConditionalCheckFailedException:
            pass  # the node is gone: nothing to drain
