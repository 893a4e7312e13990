"""billing_exports functions: one handler per operation (see template.yaml)."""

# >>> generated: handlers - from tools/generate.py API_FUNCTIONS; ./dev generate writes this, edit the source
from itl_accelerator.api.routes import billing_exports as routes
from itl_functions.adapter import operation_handler

get = operation_handler(routes.router, "BillingExports_Get")
# <<< generated: handlers
