// Reading what the caller may see of a subscription: its nodes, instances and jobs, and their usage stats.
// The API has stats per node, instance and job only (no subscription-wide route), so sums across resources are
// the exact decimal sums of what each resource's own stats answered; what the API refuses is listed, not hidden.
import { paths, parseId } from '../api.js';
import { sumCosts } from '../format.js';

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

/** Nodes, instances (of those nodes) and jobs in the context, each list at most `max` items. */
export async function inventory(api, ctx, max = 200) {
  const pages = Math.ceil(max / 100);
  const [nodes, jobs] = await Promise.all([
    api.all(paths.nodes(ctx.sub, ctx.rg), {}, pages),
    api.all(paths.jobs(ctx.sub, ctx.rg), {}, pages),
  ]);
  const lists = await mapLimit(nodes, 4, (n) => api.all(paths.instances(ctx.sub, parseId(n.id).rg, n.name)));
  const instances = lists.flatMap((r) => (r.status === 'fulfilled' ? r.value : []));
  const refused = lists.flatMap((r, i) => (r.status === 'rejected' ? [{ id: nodes[i].id, error: r.reason }] : []));
  return { nodes, instances, jobs, refused };
}

/** Stats of each id over `hours`: [{id, stats} | {id, error}]. */
export async function statsOf(api, ids, hours) {
  const results = await mapLimit(ids, 4, (id) => api.get(`${id}/stats`, { hours }));
  return results.map((r, i) => (r.status === 'fulfilled' ? { id: ids[i], stats: r.value } : { id: ids[i], error: r.reason }));
}

/** Cost of the last `hours` points of a stats body (points are hourly, oldest first). */
export function lastHoursCost(stats, hours) {
  return sumCosts((stats.value || []).slice(-hours).map((p) => p.cost || []));
}

/** {day, month} spend of a list of stats results read with hours=720. */
export function spendOf(results) {
  const ok = results.filter((r) => r.stats);
  return {
    day: sumCosts(ok.map((r) => lastHoursCost(r.stats, 24))),
    month: sumCosts(ok.map((r) => r.stats.totals.cost || [])),
    read: ok.length,
    refused: results.filter((r) => r.error),
  };
}
