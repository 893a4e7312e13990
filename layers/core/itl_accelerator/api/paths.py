"""The ARM paths of the API's resources (FastAPI route templates), in one place: each route module — and the stats
routes, which hang below three of them — builds on these without importing another route module."""

RESOURCE_GROUP = "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator"
SUBSCRIPTION = "/subscriptions/{subscriptionId}/providers/ITL.Accelerator"

NODES = RESOURCE_GROUP + "/sparkNodes"
NODES_OF_SUBSCRIPTION = SUBSCRIPTION + "/sparkNodes"
NODE = NODES + "/{nodeName}"

INSTANCES = NODE + "/sparkOllamaInstances"
INSTANCE = INSTANCES + "/{instanceName}"

JOBS = RESOURCE_GROUP + "/sparkJobs"
JOBS_OF_SUBSCRIPTION = SUBSCRIPTION + "/sparkJobs"
JOB = JOBS + "/{jobName}"

RESERVATIONS = RESOURCE_GROUP + "/capacityReservations"
RESERVATIONS_OF_SUBSCRIPTION = SUBSCRIPTION + "/capacityReservations"
RESERVATION = RESERVATIONS + "/{reservationName}"

LOCATION = SUBSCRIPTION + "/locations/{location}"
QUOTAS = LOCATION + "/quotas"
QUOTA = QUOTAS + "/{quotaName}"
USAGES = LOCATION + "/usages"
OFFERS = LOCATION + "/offers"
COST_QUERY = SUBSCRIPTION + "/costQuery"
BILLING_EXPORT = SUBSCRIPTION + "/billingExports/{day}"
BUDGETS = SUBSCRIPTION + "/budgets"
BUDGET = BUDGETS + "/{budgetName}"
