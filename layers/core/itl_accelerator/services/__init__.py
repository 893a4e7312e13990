"""Business rules: RBAC, tenant scope, ARM resource semantics, audit. Services talk to the store, never to HTTP."""
