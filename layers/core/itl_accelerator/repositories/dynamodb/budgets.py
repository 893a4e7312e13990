"""Budgets in the table (item type ``Budget``: ``SUB#{sub}`` / ``BUDGET#{name}``; domain/budgets.py), each listed in
the system partition ``SYS#BUDGETS`` (``{sub}#{name}``) the budget monitor pages through — the budget and its entry
written together. A budget's state (its period, spend, thresholds notified, whether it is spent) is written with
every change of the budget (evaluated at once) and by every evaluation of the monitor, each conditioned on the
state's version it read, the monitor's with the audit items of what it notified."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any

from itl_accelerator.domain.budgets import Budget, BudgetAction, BudgetFilter, BudgetState, Threshold
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import decode_token, encode_token, plain, to_json, typed
from itl_accelerator.repositories.dynamodb.table import Table, TransactionFailed
from itl_accelerator.repositories.errors import EtagMismatch, ItemExists, ItemMissing, StateMoved
from itl_accelerator.repositories.protocols import Page


def _spec(budget: Budget) -> dict[str, Any]:
    return {
        "amount": format(budget.amount, "f"),
        "currency": budget.currency,
        "thresholds": [{"percent": format(t.percent, "f"), "above": t.strictly_above} for t in budget.thresholds],
        "action": str(budget.action),
        "resourceGroups": list(budget.filter.resource_groups),
        "tagKey": budget.filter.tag_key,
        "tagValues": list(budget.filter.tag_values),
        "start": budget.start.isoformat(),
        "end": budget.end.isoformat() if budget.end else None,
    }


def budget_from_item(subscription_id: str, item: dict[str, Any]) -> Budget:
    """A budget from its item (plain values)."""
    spec = json.loads(item["spec"])
    return Budget(
        subscription_id=subscription_id,
        name=str(item["budgetName"]),
        document=json.loads(item["doc"]),
        etag=str(item["etag"]),
        amount=Decimal(spec["amount"]),
        currency=spec["currency"],
        thresholds=tuple(
            Threshold(Decimal(t["percent"]), bool(t["above"])) if isinstance(t, dict) else Threshold(Decimal(t))
            for t in spec["thresholds"]
        ),
        action=BudgetAction(spec["action"]),
        filter=BudgetFilter(tuple(spec["resourceGroups"]), spec["tagKey"], tuple(spec["tagValues"])),
        start=datetime.fromisoformat(spec["start"]),
        end=datetime.fromisoformat(spec["end"]) if spec.get("end") else None,
        state=BudgetState(
            period=str(item.get("statePeriod", "")),
            spend=Decimal(str(item.get("stateSpend", "0"))),
            other=tuple((c, Decimal(a)) for c, a in json.loads(item.get("stateOther") or "[]")),
            notified=tuple(Decimal(t) for t in json.loads(item.get("stateNotified") or "[]")),
            exceeded=bool(item.get("stateExceeded", False)),
            exceeded_notified=bool(item.get("stateExceededNotified", False)),
            evaluated_at=str(item.get("stateEvaluatedAt", "")),
            version=int(item.get("stateVersion", 0)),
        ),
    )


def _state_values(state: BudgetState, version: int) -> dict[str, Any]:
    """The state's attributes (``:s*`` values of an update) at ``version``."""
    return {
        ":sp": state.period,
        ":ss": format(state.spend, "f"),
        ":so": json.dumps([[c, format(a, "f")] for c, a in state.other]),
        ":sn": json.dumps([format(t, "f") for t in state.notified]),
        ":sx": state.exceeded,
        ":sxn": state.exceeded_notified,
        ":se": state.evaluated_at,
        ":sv": version,
    }


_STATE_SET = (
    "statePeriod = :sp, stateSpend = :ss, stateOther = :so, stateNotified = :sn, stateExceeded = :sx, "
    "stateExceededNotified = :sxn, stateEvaluatedAt = :se, stateVersion = :sv"
)


def _unchanged(read_version: int, values: dict[str, Any]) -> str:
    """The condition that the state is still at ``read_version`` (adds its value to ``values``)."""
    if read_version:
        values[":read"] = read_version
        return "stateVersion = :read"
    return "attribute_not_exists(stateVersion)"


def _index_key(budget: Budget) -> dict[str, str]:
    return {"PK": keys.BUDGETS_PK, "SK": f"{budget.subscription_id.lower()}{keys.SEP}{budget.name.lower()}"}


class DynamoBudgetRepository:
    """:class:`~itl_accelerator.repositories.protocols.BudgetRepository` over the table."""

    def __init__(self, table: Table):
        self._t = table

    def _key(self, subscription_id: str, name: str) -> dict[str, str]:
        return {"PK": keys.subscription_pk(subscription_id), "SK": keys.budget_sk(name)}

    def get(self, subscription_id: str, name: str) -> Budget | None:
        key = self._key(subscription_id, name)
        item = self._t.get_item(key["PK"], key["SK"])
        return budget_from_item(subscription_id, item) if item else None

    def in_subscription(self, subscription_id: str) -> list[Budget]:
        """One ``Query`` (consistent; a subscription has a few budgets)."""
        items = self._t.query_all(
            KeyConditionExpression="PK = :pk AND begins_with(SK, :prefix)",
            ExpressionAttributeValues=typed(
                {":pk": keys.subscription_pk(subscription_id), ":prefix": keys.budget_sk("")}
            ),
            ConsistentRead=True,
        )
        return [budget_from_item(subscription_id, i) for i in items]

    def sweep_cursor(self) -> str | None:
        """``SYS#BUDGETSWEEP`` / ``CURSOR``: its ``token`` (consistent read)."""
        item = self._t.get_item(keys.BUDGET_SWEEP_PK, "CURSOR")
        return str(item["token"]) if item and item.get("token") else None

    def save_sweep_cursor(self, token: str | None) -> None:
        """One ``PutItem`` (no ``token`` attribute: from the start)."""
        item: dict[str, Any] = {"PK": keys.BUDGET_SWEEP_PK, "SK": "CURSOR"}
        if token:
            item["token"] = token
        self._t.client.put_item(TableName=self._t.name, Item=typed(item))

    def every(self, limit: int, token: str | None) -> Page[Budget]:
        """A page of the index, then one consistent read per budget."""
        request: dict[str, Any] = {
            "TableName": self._t.name,
            "KeyConditionExpression": "PK = :pk",
            "ExpressionAttributeValues": typed({":pk": keys.BUDGETS_PK}),
            "Limit": limit,
        }
        if token:
            request["ExclusiveStartKey"] = decode_token(
                token, pk_attr="PK", pk=keys.BUDGETS_PK, sk_attr="SK", sk_prefix=""
            )
        response = self._t.client.query(**request)
        found = []
        for entry in map(plain, response.get("Items", [])):
            budget = self.get(str(entry["subscriptionId"]), str(entry["budgetName"]))
            if budget is not None:
                found.append(budget)
        last = response.get("LastEvaluatedKey")
        return Page(found, encode_token(last) if last else None)

    def put(self, budget: Budget, audit: AuditEvent, *, expected_etag: str | None, read_version: int = 0) -> None:
        """Create (``expected_etag`` None: the name must be free) or replace (at ``expected_etag``, its state still at
        ``read_version``) a budget with its index entry and audit event, in one transaction; the budget's
        ``state`` is written with it, one version on."""
        key = self._key(budget.subscription_id, budget.name)
        values: dict[str, Any] = {
            ":t": "Budget",
            ":n": budget.name,
            ":doc": to_json(budget.document),
            ":etag": budget.etag,
            ":spec": to_json(_spec(budget)),
            **_state_values(budget.state, read_version + 1),
        }
        update: dict[str, Any] = {
            "TableName": self._t.name,
            "Key": typed(key),
            "UpdateExpression": "SET entityType = :t, budgetName = :n, doc = :doc, etag = :etag, spec = :spec, "
            + _STATE_SET,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if expected_etag is None:
            update["ConditionExpression"] = "attribute_not_exists(PK)"
        else:
            update["ConditionExpression"] = f"etag = :expected AND {_unchanged(read_version, values)}"
            values[":expected"] = expected_etag
        update["ExpressionAttributeValues"] = typed(values)
        entry = {**_index_key(budget), "subscriptionId": budget.subscription_id, "budgetName": budget.name}
        try:
            self._t.transact(
                [
                    {"Update": update},
                    {"Put": {"TableName": self._t.name, "Item": typed(entry)}},
                    self._t.audit_put(audit),
                ]
            )
        except TransactionFailed as exc:
            if 0 in exc.failed:
                old = exc.failed[0]
                if expected_etag is None:
                    raise ItemExists() from exc
                if not old:
                    raise ItemMissing() from exc
                raise (StateMoved() if old.get("etag") == expected_etag else EtagMismatch()) from exc
            raise ItemExists() from exc

    def delete(self, budget: Budget, audit: AuditEvent) -> None:
        """Remove a budget (still at its etag) and its index entry, with its audit event. Raises ``EtagMismatch``."""
        key = self._key(budget.subscription_id, budget.name)
        try:
            self._t.transact(
                [
                    {
                        "Delete": {
                            "TableName": self._t.name,
                            "Key": typed(key),
                            "ConditionExpression": "etag = :etag",
                            "ExpressionAttributeValues": typed({":etag": budget.etag}),
                        }
                    },
                    {"Delete": {"TableName": self._t.name, "Key": typed(_index_key(budget))}},
                    self._t.audit_put(audit),
                ]
            )
        except TransactionFailed as exc:
            raise EtagMismatch() from exc

    def record(self, budget: Budget, state: BudgetState, audits: list[AuditEvent]) -> bool:
        """Write the monitor's ``state`` (version one past the one read) and the audit items of what it crossed, in
        one transaction — only if no other evaluation was written since ``budget`` was read. False otherwise."""
        key = self._key(budget.subscription_id, budget.name)
        values = _state_values(state, budget.state.version + 1)
        unchanged = _unchanged(budget.state.version, values)
        update = {
            "Update": {
                "TableName": self._t.name,
                "Key": typed(key),
                "UpdateExpression": "SET " + _STATE_SET,
                "ConditionExpression": f"attribute_exists(PK) AND {unchanged}",
                "ExpressionAttributeValues": typed(values),
            }
        }
        try:
            self._t.transact([update, *(self._t.audit_put(a) for a in audits)])
        except TransactionFailed:
            return False
        return True
