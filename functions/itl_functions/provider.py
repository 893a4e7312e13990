"""Provider-level functions: operations list, subscription registration, audit query."""

from itl_functions.adapter import operation_handler

list_operations = operation_handler("Operations_List")
put_subscription = operation_handler("Subscriptions_CreateOrUpdate")
get_subscription = operation_handler("Subscriptions_Get")
list_audit_events = operation_handler("AuditEvents_List")
