// Overview of a subscription or resource group: nodes with free/allocated devices per accelerator kind, running
// instances and jobs, and what the caller paid or earned in the last 24 hours and 30 days — the cost query's answer
// for that caller (docs/API_REFERENCE.md "Cost queries"), labelled with when it was asked. A handful of requests
// whatever the fleet's size (nodes, jobs, the instances of busy nodes, two cost queries), read again while shown.
import { html, nothing } from 'lit';
import { parseId } from '../api.js';
import { View, loading, error, errors, gpuBar, statusBadge, link, kindOf, devices } from '../ui.js';
import { costs, time } from '../format.js';
import { inventory, billedRows, billedTotals, INVENTORY_MAX } from './spend.js';
import { lastHoursLink } from './costs.js';

/** How often the fleet is read again while the overview is shown (ms); spend moves with the 15-minute roll-up. */
const FLEET_EVERY = 10000;
const SPEND_EVERY = 60000;

class Overview extends View {
  static properties = { inv: { state: true }, spend: { state: true } };

  constructor() {
    super();
    this.inv = null;
  }

  connectedCallback() {
    super.connectedCallback();
    this.load();
    this.every('fleet', FLEET_EVERY, async () => this.show(await inventory(this.api, this.ctx)), 'inv');
    this.every('spend', SPEND_EVERY, () => this.readSpend(), 'spend');
  }

  async load() {
    const inv = await this.track('inv', () => inventory(this.api, this.ctx));
    if (inv) this.show(inv);
    this.track('spend', () => this.readSpend());
  }

  show(inv) {
    this.inv = inv;
    inv.nodes.forEach((n) => this.app.noteGroup(parseId(n.id).rg));
  }

  /** Last 24 h and last 30 days (720 h) up to and including the current hour, as the cost query bills the caller. */
  async readSpend() {
    const [day, month] = await Promise.all([billedRows(this.api, this.ctx, 24), billedRows(this.api, this.ctx, 720)]);
    this.spend = { day: billedTotals(day), month: billedTotals(month), asOf: month.asOf };
  }

  render() {
    const inv = this.inv;
    const where = this.ctx.rg ? `resource group ${this.ctx.rg}` : `subscription ${this.ctx.sub}`;
    return html`<h1>Overview</h1><p class="muted">${where}${inv && inv.more ? html` · counts of the first ${INVENTORY_MAX} nodes and jobs` : nothing}</p>
      ${loading(this.invLoading, 'Loading the fleet')} ${error(this.invError)}
      ${inv ? this.renderTiles(inv) : nothing}
      ${inv ? this.renderNodes(inv) : nothing}`;
  }

  /** What the cost query answers this caller (docs/RBAC.md): an admin everyone's work in scope, a supplier its
   *  nodes' earnings, a consumer its own work — one holding both the latter two, their union. */
  get billedTitle() {
    const roles = this.app.auth.identity.roles;
    if (roles.includes('itl-accelerator-admin')) return `Billed in ${this.ctx.rg ? 'this resource group' : 'this subscription'} (everyone’s work)`;
    const earns = roles.includes('itl-accelerator-supplier');
    const spends = roles.includes('itl-accelerator-consumer');
    if (earns && spends) return 'Your spend and your nodes’ earnings, together';
    return earns ? 'Earned by your nodes' : 'Billed to you';
  }

  renderTiles(inv) {
    const serving = inv.instances.filter((i) => i.properties.provisioningState === 'Succeeded').length;
    const byStatus = {};
    for (const j of inv.jobs) byStatus[j.properties.status] = (byStatus[j.properties.status] || 0) + 1;
    // devices per kind (never added across kinds: a TPU is not a GPU), GPUs first
    const byKind = new Map([['GPU', { total: 0, used: 0, nodes: 0 }]]);
    for (const n of inv.nodes) {
      const kind = kindOf(n.properties);
      const d = devices(n.properties.capacity);
      const k = byKind.get(kind) || { total: 0, used: 0, nodes: 0 };
      byKind.set(kind, { total: k.total + d.total, used: k.used + d.used, nodes: k.nodes + 1 });
    }
    return html`<div class="tiles">
      ${[...byKind].filter(([kind, k]) => kind === 'GPU' || k.nodes).map(([kind, k]) => html`<section class="tile" aria-label=${`${kind}s`}><h2>${kind}s</h2><p class="big">${k.used} / ${k.total}</p><p class="small">allocated on ${k.nodes} nodes</p></section>`)}
      <section class="tile" aria-label="Instances"><h2>Instances</h2><p class="big" data-testid="instances-serving">${serving}</p><p class="small">serving of ${inv.instances.length}</p></section>
      <section class="tile" aria-label="Jobs"><h2>Jobs</h2><p class="big" data-testid="jobs-running">${byStatus.Running || 0}</p>
        <p class="small">running · ${byStatus.Pending || 0} pending · ${byStatus.Scheduled || 0} scheduled · ${byStatus.Succeeded || 0} succeeded · ${byStatus.Failed || 0} failed · ${byStatus.Canceled || 0} canceled · ${byStatus.Preempted || 0} preempted</p></section>
      <section class="tile" aria-label="Spend">
        <h2>${this.billedTitle}</h2>
        ${loading(this.spendLoading && !this.spend, 'Reading the bill')} ${error(this.spendError)}
        ${this.spend ? html`<p>Last 24 h: <strong data-testid="spend-day">${costs(this.spend.day)}</strong></p>
          <p>Last 30 days: <strong data-testid="spend-month">${costs(this.spend.month)}</strong></p>
          <p class="small muted">The cost query's answer for you${this.ctx.rg ? ` in ${this.ctx.rg}` : ''}, asked ${time(this.spend.asOf, true)}; it bills the usage rolled up every 15 minutes, deleted work included.</p>` : nothing}
        <p class="small"><a href=${lastHoursLink(24)}>Cost per hour, last 24 h</a></p>
      </section>
    </div>`;
  }

  renderNodes(inv) {
    return html`<section aria-label="Nodes"><h2>Nodes</h2>
      ${inv.nodes.length ? html`<ul class="node-bars">${inv.nodes.map((n) => {
        const id = parseId(n.id);
        return html`<li><a href=${link('nodes', id.rg, n.name)}>${n.name}</a> <span class="muted small">${id.rg}</span> ${statusBadge(n.properties.availability)} ${gpuBar(n.properties.capacity, kindOf(n.properties))}</li>`;
      })}</ul>` : html`<p class="empty">No nodes here yet.</p>`}
      ${errors(inv.refused.map((r) => r.error), 'nodes')}
    </section>`;
  }
}
customElements.define('itl-overview', Overview);
