// Overview of a subscription or resource group: nodes with free/allocated devices per accelerator kind, running instances and jobs, and
// spend of the last 24 hours and 30 days (from the stats of what the caller may read).
import { html, nothing } from 'lit';
import { parseId } from '../api.js';
import { View, loading, error, gpuBar, statusBadge, link } from '../ui.js';
import { costs } from '../format.js';
import { inventory, statsOf, spendOf } from './spend.js';
import { lastHoursLink } from './costs.js';

class Overview extends View {
  static properties = { inv: { state: true }, spend: { state: true }, earnings: { state: true } };

  constructor() {
    super();
    this.inv = null;
  }

  connectedCallback() {
    super.connectedCallback();
    this.load();
  }

  async load() {
    const inv = await this.track('inv', () => inventory(this.api, this.ctx));
    if (!inv) return;
    this.inv = inv;
    inv.nodes.forEach((n) => this.app.noteGroup(parseId(n.id).rg));
    this.track('spend', async () => {
      const ids = [...inv.jobs.map((j) => j.id), ...inv.instances.map((i) => i.id)];
      this.spend = spendOf(await statsOf(this.api, ids, 720));
    });
    this.track('earnings', async () => {
      this.earnings = spendOf(await statsOf(this.api, inv.nodes.map((n) => n.id), 720));
    });
  }

  render() {
    const inv = this.inv;
    const where = this.ctx.rg ? `resource group ${this.ctx.rg}` : `subscription ${this.ctx.sub}`;
    return html`<h1>Overview</h1><p class="muted">${where}</p>
      ${loading(this.invLoading, 'Loading the fleet')} ${error(this.invError)}
      ${inv ? this.renderTiles(inv) : nothing}
      ${inv ? this.renderNodes(inv) : nothing}`;
  }

  renderTiles(inv) {
    const serving = inv.instances.filter((i) => i.properties.provisioningState === 'Succeeded').length;
    const byStatus = {};
    for (const j of inv.jobs) byStatus[j.properties.status] = (byStatus[j.properties.status] || 0) + 1;
    // devices per kind (never added across kinds: a TPU is not a GPU), GPUs first
    const byKind = new Map([['GPU', { total: 0, used: 0, nodes: 0 }]]);
    for (const n of inv.nodes) {
      const kind = (n.properties.accelerator && n.properties.accelerator.kind) || 'GPU';
      const c = n.properties.capacity;
      const k = byKind.get(kind) || { total: 0, used: 0, nodes: 0 };
      byKind.set(kind, { total: k.total + (c.totalAccelerators ?? c.totalGpus), used: k.used + (c.allocatedAccelerators ?? c.allocatedGpus), nodes: k.nodes + 1 });
    }
    return html`<div class="tiles">
      ${[...byKind].filter(([kind, k]) => kind === 'GPU' || k.nodes).map(([kind, k]) => html`<section class="tile" aria-label=${`${kind}s`}><h2>${kind}s</h2><p class="big">${k.used} / ${k.total}</p><p class="small">allocated on ${k.nodes} nodes</p></section>`)}
      <section class="tile" aria-label="Instances"><h2>Instances</h2><p class="big" data-testid="instances-serving">${serving}</p><p class="small">serving of ${inv.instances.length}</p></section>
      <section class="tile" aria-label="Jobs"><h2>Jobs</h2><p class="big" data-testid="jobs-running">${byStatus.Running || 0}</p>
        <p class="small">running · ${byStatus.Pending || 0} pending · ${byStatus.Scheduled || 0} scheduled · ${byStatus.Succeeded || 0} succeeded · ${byStatus.Failed || 0} failed · ${byStatus.Canceled || 0} canceled</p></section>
      <section class="tile" aria-label="Spend">
        <h2>Spend on jobs and instances</h2>
        ${loading(this.spendLoading, 'Reading usage')} ${error(this.spendError)}
        ${this.spend ? html`<p>Last 24 h: <strong data-testid="spend-day">${costs(this.spend.day)}</strong></p>
          <p>Last 30 days: <strong data-testid="spend-month">${costs(this.spend.month)}</strong></p>
          <p class="small muted">Sum of the stats of ${this.spend.read} resources you can read.</p>` : nothing}
        <p class="small"><a href=${lastHoursLink(24)}>Cost per hour, last 24 h</a></p>
      </section>
      <section class="tile" aria-label="Node earnings">
        <h2>Node earnings</h2>
        ${loading(this.earningsLoading, 'Reading earnings')} ${error(this.earningsError)}
        ${this.earnings ? html`${this.earnings.read
            ? html`<p>Last 24 h: <strong>${costs(this.earnings.day)}</strong></p><p>Last 30 days: <strong>${costs(this.earnings.month)}</strong></p>`
            : nothing}
          <p class="small muted">${this.earnings.read} of ${inv.nodes.length} nodes' earnings readable${this.earnings.refused.length ? html`; the API refused the others (${[...new Set(this.earnings.refused.map((r) => r.error.code))].join(', ')})` : nothing}.</p>` : nothing}
      </section>
    </div>`;
  }

  renderNodes(inv) {
    return html`<section aria-label="Nodes"><h2>Nodes</h2>
      ${inv.nodes.length ? html`<ul class="node-bars">${inv.nodes.map((n) => {
        const id = parseId(n.id);
        return html`<li><a href=${link('nodes', id.rg, n.name)}>${n.name}</a> <span class="muted small">${id.rg}</span> ${statusBadge(n.properties.availability)} ${gpuBar(n.properties.capacity, (n.properties.accelerator && n.properties.accelerator.kind) || 'GPU')}</li>`;
      })}</ul>` : html`<p class="empty">No nodes here yet.</p>`}
      ${inv.refused.map((r) => error(r.error))}
    </section>`;
  }
}
customElements.define('itl-overview', Overview);
