// What each role may do, as docs/RBAC.md's permission table says, for the portal to offer only the actions a
// user's roles hold and explain the others. Display only: the API checks every request (a resource's owner, the
// caller's scopes and the submitter still decide there), so this table may be looser than the API, never stricter.
const ADMIN = 'itl-accelerator-admin';
const SUPPLIER = 'itl-accelerator-supplier';
const CONSUMER = 'itl-accelerator-consumer';

/** action → [roles that hold it, who may, what it is (for the explanation shown instead of the action)]. */
export const ACTIONS = {
  'nodes/register': [[ADMIN], 'admins', 'Registering a node'],
  'nodes/delete': [[ADMIN], 'admins', 'Deleting a node'],
  'nodes/pricing': [[ADMIN, SUPPLIER], 'admins and the node’s supplier', 'Setting a node’s price'],
  'instances/provision': [[ADMIN], 'admins', 'Provisioning an instance'],
  'instances/delete': [[ADMIN], 'admins', 'Deleting an instance'],
  'jobs/submit': [[ADMIN, CONSUMER], 'consumers and admins', 'Submitting a job'],
  'jobs/cancel': [[ADMIN, CONSUMER], 'the job’s submitter and admins', 'Cancelling a job'],
  'jobs/delete': [[ADMIN, CONSUMER], 'the job’s submitter and admins', 'Deleting a job'],
  'budgets/write': [[ADMIN], 'admins', 'Setting a budget'],
  'quotas/write': [[ADMIN], 'admins', 'Setting a quota'],
};

/** Whether `roles` (the token's realm roles) hold `action`. */
export function allows(roles, action) {
  const [holders] = ACTIONS[action];
  return holders.some((r) => roles.includes(r));
}

/** Why an action is not offered: "Registering a node is for admins." */
export function reason(action) {
  const [, who, what] = ACTIONS[action];
  return `${what} is for ${who}.`;
}
