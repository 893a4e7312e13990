"""Long-running operation functions: status (Azure-AsyncOperation) and result (Location)."""

# >>> generated: handlers - from tools/generate.py API_FUNCTIONS; ./dev generate writes this, edit the source
from itl_accelerator.api.routes import operations as routes
from itl_functions.adapter import operation_handler

get_status = operation_handler(routes.router, "OperationStatuses_Get")
get_result = operation_handler(routes.router, "OperationResults_Get")
# <<< generated: handlers
