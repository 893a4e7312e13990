"""capacity_reservations functions: one handler per operation (see template.yaml)."""

# >>> generated: handlers - from tools/generate.py API_FUNCTIONS; ./dev generate writes this, edit the source
from itl_accelerator.api.routes import capacity_reservations as routes
from itl_functions.adapter import operation_handler

get = operation_handler(routes.router, "CapacityReservations_Get")
list_by_resource_group = operation_handler(routes.router, "CapacityReservations_ListByResourceGroup")
list_by_subscription = operation_handler(routes.router, "CapacityReservations_ListBySubscription")
create_or_update = operation_handler(routes.router, "CapacityReservations_CreateOrUpdate")
delete = operation_handler(routes.router, "CapacityReservations_Delete")
# <<< generated: handlers
