// What each role may do and read, as docs/RBAC.md's permission table says, for the portal to offer only the actions a
// user's roles hold and explain the others, and to ask for a figure only those whose roles may read it (a request the
// API refuses is a dead end for the user and a Denied entry in the admins' audit log). Display only: the API checks
// every request (a resource's owner, the caller's scopes and the submitter still decide there), so this table may be
// looser than the API, never stricter.
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
  'reservations/book': [[ADMIN, CONSUMER], 'consumers and admins', 'Booking capacity'],
  'reservations/cancel': [[ADMIN, CONSUMER], 'the reservation’s owner and admins', 'Cancelling a reservation'],
  'budgets/write': [[ADMIN], 'admins', 'Setting a budget'],
  'quotas/write': [[ADMIN], 'admins', 'Setting a quota'],
  // reads some roles are refused (403, audited): never asked for those roles
  'activity/read': [[ADMIN], 'admins', 'The activity log'],
  'nodes/stats': [[ADMIN, SUPPLIER], 'admins and the node’s supplier', 'Reading a node’s utilisation and earnings'],
  // what a role sees of every charge in scope: admins a budget's spend, the whole of a node's figures, an instance's
  // cost billed to the subscription
  'charges/all': [[ADMIN], 'admins', 'Every charge of the subscription'],
};

/** Actions of the subscription itself: besides the role, they need a scope of the whole subscription (docs/RBAC.md
 *  "Scope before role": a caller holding only some of its resource groups is refused, 403). */
export const WHOLE_SUBSCRIPTION = new Set(['activity/read', 'budgets/write', 'quotas/write']);

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

/** Why `action` is not offered to a caller with `roles` who holds the whole subscription or not (`wholeSubscription`),
 *  or null when it is offered. */
export function refusal(roles, wholeSubscription, action) {
  if (!allows(roles, action)) return reason(action);
  if (WHOLE_SUBSCRIPTION.has(action) && !wholeSubscription) {
    const [, , what] = ACTIONS[action];
    return `${what} needs a scope of the whole subscription: your token holds only some of its resource groups.`;
  }
  return null;
}

/** Whether a node's `/stats` (utilisation and earnings) are the caller's to read: admins every node's, a supplier
 *  those of the nodes it owns (docs/RBAC.md `sparkNodes/usage/read`; a former owner too, which the portal cannot
 *  know: it offers that reading on request, never by itself). */
export function mayReadNodeStats(identity, node) {
  if (allows(identity.roles, 'charges/all')) return true;
  return allows(identity.roles, 'nodes/stats') && Boolean(node) && node.properties.owner === identity.subject;
}
