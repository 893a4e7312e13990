"""GPU quota and usage functions: one handler per operation (see template.yaml)."""

# >>> generated: handlers - from tools/generate.py API_FUNCTIONS; ./dev generate writes this, edit the source
from itl_accelerator.api.routes import quotas as routes
from itl_functions.adapter import operation_handler

get = operation_handler(routes.router, "Quotas_Get")
list_quotas = operation_handler(routes.router, "Quotas_List")
put = operation_handler(routes.router, "Quotas_CreateOrUpdate")
delete = operation_handler(routes.router, "Quotas_Delete")
usages = operation_handler(routes.router, "Usages_List")
# <<< generated: handlers
