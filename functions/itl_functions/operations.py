"""Long-running operation functions: status (Azure-AsyncOperation) and result (Location)."""

from itl_functions.adapter import operation_handler

get_status = operation_handler("OperationStatuses_Get")
get_result = operation_handler("OperationResults_Get")
