// What the caller may see of a subscription (its nodes, instances and jobs) and what it paid or earned: money is
// always the API's billing answer — the cost query (POST .../costQuery), which bills what the caller pays (a
// consumer its own work, an admin all of it) or earns (a supplier its nodes'), deleted resources included — never a
// sum of per-resource stats, which would add up other people's work and drop what was deleted.
import { paths, parseId } from '../api.js';
import { devices } from '../ui.js';
import { requestBody, totalsByCurrency } from './costs.js';

/** Run fn over items with at most `limit` requests in flight; results in input order as allSettled entries. */
export async function mapLimit(items, limit, fn) {
  const results = new Array(items.length);
  let next = 0;
  async function worker() {
    while (next < items.length) {
      const i = next++;
      try {
        results[i] = { status: 'fulfilled', value: await fn(items[i], i) };
      } catch (reason) {
        results[i] = { status: 'rejected', reason };
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** The most nodes and jobs one inventory lists (one request each: the API's largest page). */
export const INVENTORY_MAX = 1000;

/** Nodes and jobs in the context (one page of up to 1000 each, `more` true when there are others), and the
 *  instances of the nodes that hold any allocation (an instance holds devices, so a node with none allocated has
 *  none): a handful of requests however many jobs there are. */
export async function inventory(api, ctx) {
  const [nodes, jobs] = await Promise.all([
    api.page(paths.nodes(ctx.sub, ctx.rg), { $top: INVENTORY_MAX }),
    api.page(paths.jobs(ctx.sub, ctx.rg), { $top: INVENTORY_MAX }),
  ]);
  const busy = nodes.value.filter((n) => devices(n.properties.capacity).used > 0);
  const { instances, refused } = await instancesOf(api, ctx.sub, busy);
  return { nodes: nodes.value, jobs: jobs.value, instances, refused, more: Boolean(nodes.nextLink || jobs.nextLink) };
}

/** The instances of `nodes` (the API lists them by node: one request each, four at a time), each with the `rg` and
 *  `node` it is on; and what the API refused, as [{id of the node, error}]. */
export async function instancesOf(api, sub, nodes) {
  const lists = await mapLimit(nodes, 4, (n) => {
    const rg = parseId(n.id).rg;
    return api.all(paths.instances(sub, rg, n.name)).then((items) => items.map((i) => ({ ...i, rg, node: n.name })));
  });
  return {
    instances: lists.flatMap((r) => (r.status === 'fulfilled' ? r.value : [])),
    refused: lists.flatMap((r, i) => (r.status === 'rejected' ? [{ id: nodes[i].id, error: r.reason }] : [])),
  };
}

/** The cost query of the last `hours` up to and including the current hour (UTC), in the resource group in view,
 *  grouped by `groups` (dimension names): {columns, rows, asOf} as the API answered, asOf the time it was asked. */
export async function billedRows(api, ctx, hours, groups = []) {
  const body = requestBody({ timeframe: 'Custom', hours: String(hours), granularity: 'None', measure: 'Cost', groups, fd: '', fv: '' }, ctx.rg);
  const r = await api.request('POST', `${paths.sub(ctx.sub)}/costQuery`, { body });
  return { ...r.body.properties, asOf: new Date().toISOString(), body };
}

/** [{currency, amount}] of cost query rows (exact decimal sums per currency; never added across currencies). */
export function billedTotals({ columns, rows }) {
  const cost = columns.findIndex((c) => c.name === 'totalCost'); // the aggregation's name (requestBody: total{measure})
  return totalsByCurrency(rows, cost, columns.findIndex((c) => c.name === 'Currency'));
}
