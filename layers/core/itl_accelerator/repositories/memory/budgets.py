"""Budgets in memory: the DynamoDB implementation's ``DynamoBudgetRepository`` (repositories/dynamodb/budgets.py)."""

from __future__ import annotations

import copy
from dataclasses import replace

from itl_accelerator.domain.budgets import Budget, BudgetState
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.errors import EtagMismatch, ItemExists, ItemMissing, StateMoved
from itl_accelerator.repositories.memory.state import MemoryState, audit_size, check_size, decode_token, encode_token
from itl_accelerator.repositories.protocols import Page


def _key(subscription_id: str, name: str) -> tuple[str, str]:
    return (subscription_id.lower(), name.lower())


class MemoryBudgetRepository:
    """:class:`~itl_accelerator.repositories.protocols.BudgetRepository` in memory."""

    def __init__(self, state: MemoryState):
        self._s = state

    def get(self, subscription_id: str, name: str) -> Budget | None:
        with self._s.lock:
            found = self._s.budgets.get(_key(subscription_id, name))
            return replace(copy.deepcopy(found), subscription_id=subscription_id) if found else None

    def in_subscription(self, subscription_id: str) -> list[Budget]:
        with self._s.lock:
            found = sorted((k, b) for k, b in self._s.budgets.items() if k[0] == subscription_id.lower())
            return [replace(copy.deepcopy(b), subscription_id=subscription_id) for _, b in found]

    def every(self, limit: int, token: str | None) -> Page[Budget]:
        """In the index's order (``{sub}#{name}``, lower case)."""
        with self._s.lock:
            after = decode_token(token, "budgets") if token else ""
            ordered = sorted((f"{k[0]}#{k[1]}", b) for k, b in self._s.budgets.items())
            rest = [(sk, b) for sk, b in ordered if sk > after]
            page = rest[:limit]
            more = len(rest) > limit
            return Page(
                [copy.deepcopy(b) for _, b in page], encode_token("budgets", page[-1][0]) if more and page else None
            )

    def sweep_cursor(self) -> str | None:
        with self._s.lock:
            return self._s.budget_sweep_cursor

    def save_sweep_cursor(self, token: str | None) -> None:
        with self._s.lock:
            self._s.budget_sweep_cursor = token

    def put(self, budget: Budget, audit: AuditEvent, *, expected_etag: str | None, read_version: int = 0) -> None:
        with self._s.lock:
            check_size(budget.document, audit_size(audit))
            key = _key(budget.subscription_id, budget.name)
            stored = self._s.budgets.get(key)
            if expected_etag is None and stored is not None:
                raise ItemExists()
            if expected_etag is not None:
                if stored is None:
                    raise ItemMissing()
                if stored.etag != expected_etag:
                    raise EtagMismatch()
                if stored.state.version != read_version:
                    raise StateMoved()
            if self._s.audit_taken(audit):
                raise ItemExists()
            self._s.budgets[key] = replace(copy.deepcopy(budget), state=replace(budget.state, version=read_version + 1))
            self._s.put_audit(audit)

    def delete(self, budget: Budget, audit: AuditEvent) -> None:
        with self._s.lock:
            key = _key(budget.subscription_id, budget.name)
            stored = self._s.budgets.get(key)
            if stored is None or stored.etag != budget.etag or self._s.audit_taken(audit):
                raise EtagMismatch()
            del self._s.budgets[key]
            self._s.put_audit(audit)

    def record(self, budget: Budget, state: BudgetState, audits: list[AuditEvent]) -> bool:
        with self._s.lock:
            stored = self._s.budgets.get(_key(budget.subscription_id, budget.name))
            if stored is None or stored.state.version != budget.state.version:
                return False
            if any(self._s.audit_taken(a) for a in audits):
                return False
            stored.state = replace(state, version=budget.state.version + 1)
            for audit in audits:
                self._s.put_audit(audit)
            return True
