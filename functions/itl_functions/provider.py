"""Provider-level functions: operations list, subscription registration, audit query."""

# >>> generated: handlers - from tools/generate.py API_FUNCTIONS; ./dev generate writes this, edit the source
from itl_accelerator.api.routes import provider as routes
from itl_functions.adapter import operation_handler

list_operations = operation_handler(routes.router, "Operations_List")
put_subscription = operation_handler(routes.router, "Subscriptions_CreateOrUpdate")
get_subscription = operation_handler(routes.router, "Subscriptions_Get")
list_audit_events = operation_handler(routes.router, "AuditEvents_List")
# <<< generated: handlers
