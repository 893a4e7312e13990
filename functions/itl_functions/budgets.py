"""Budget functions: one handler per operation (see template.yaml)."""

# >>> generated: handlers - from tools/generate.py API_FUNCTIONS; ./dev generate writes this, edit the source
from itl_accelerator.api.routes import budgets as routes
from itl_functions.adapter import operation_handler

get = operation_handler(routes.router, "Budgets_Get")
list_budgets = operation_handler(routes.router, "Budgets_List")
put = operation_handler(routes.router, "Budgets_CreateOrUpdate")
delete = operation_handler(routes.router, "Budgets_Delete")
# <<< generated: handlers
