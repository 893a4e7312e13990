// Usage and cost: one resource's hourly usage over `hours` with the API's totals per currency; the sum over
// every resource the caller may read in the subscription or resource group; where the billing export stands.
import { html, nothing } from 'lit';
import { parseId } from '../api.js';
import { View, loading, error, field, formValues } from '../ui.js';
import { costs, sumCosts, number } from '../format.js';
import { statsPoints, statsCurrencies } from '../chart.js';
import { inventory, statsOf } from './spend.js';
import { lastHoursLink } from './costs.js';
import '../chart.js';

const KIND = { node: 'Node', instance: 'Instance', job: 'Job' };

class Usage extends View {
  static properties = { resourceId: {}, hours: {}, inv: { state: true }, stats: { state: true }, summary: { state: true } };

  constructor() {
    super();
    this.inv = null;
    this.stats = null;
    this.summary = null;
  }

  connectedCallback() {
    super.connectedCallback();
    this.track('inv', async () => (this.inv = await inventory(this.api, this.ctx)));
    if (this.resourceId) this.loadStats();
  }

  loadStats() {
    return this.track('stats', async () => {
      this.stats = null;
      this.stats = await this.api.get(`${this.resourceId}/stats`, { hours: this.hours });
    });
  }

  show(e) {
    e.preventDefault();
    const v = formValues(e.target);
    location.hash = `#/usage?resource=${encodeURIComponent(v.resource)}&hours=${encodeURIComponent(v.hours)}`;
  }

  summarise() {
    return this.track('summary', async () => {
      const inv = this.inv;
      const spend = await statsOf(this.api, [...inv.jobs, ...inv.instances].map((r) => r.id), this.hours);
      const earnings = await statsOf(this.api, inv.nodes.map((r) => r.id), this.hours);
      this.summary = { spend, earnings };
    });
  }

  options() {
    if (!this.inv) return [];
    return [...this.inv.nodes, ...this.inv.instances, ...this.inv.jobs].map((r) => {
      const id = parseId(r.id);
      return { id: r.id, label: `${KIND[id.kind]} ${id.kind === 'instance' ? `${id.node}/` : ''}${r.name} (${id.rg})` };
    });
  }

  render() {
    const opts = this.options();
    const chosen = this.resourceId && !opts.some((o) => o.id.toLowerCase() === this.resourceId.toLowerCase()) ? [{ id: this.resourceId, label: this.resourceId }] : [];
    return html`<h1>Usage and cost</h1>
      <form class="card form inline" @submit=${(e) => this.show(e)} aria-label="Choose usage">
        ${field('Resource', 'usage-resource', html`<select id="usage-resource" name="resource" required>
          <option value="">Choose a node, instance or job</option>
          ${[...chosen, ...opts].map((o) => html`<option value=${o.id} ?selected=${o.id.toLowerCase() === (this.resourceId || '').toLowerCase()}>${o.label}</option>`)}</select>`)}
        ${field('Hours', 'usage-hours', html`<input id="usage-hours" name="hours" type="number" min="1" max="720" step="1" required .value=${String(this.hours)} />`, '1–720, up to and including the current hour (UTC)')}
        <button type="submit">Show usage</button>
      </form>
      ${loading(this.invLoading, 'Loading resources')} ${error(this.invError)}
      ${loading(this.statsLoading, 'Loading usage')} ${error(this.statsError)}
      ${this.stats ? this.renderStats(this.stats) : nothing}
      <section class="card" aria-label="Across the subscription">
        <h2>All resources you can read in ${this.ctx.rg ? `resource group ${this.ctx.rg}` : `subscription ${this.ctx.sub}`}, last ${this.hours} h</h2>
        <button class="secondary" @click=${() => this.summarise()} ?disabled=${!this.inv || this.summaryLoading}>Sum usage per currency</button>
        <a href=${lastHoursLink(this.hours)}>Cost per hour of all of it, last ${this.hours} h</a>
        ${loading(this.summaryLoading, 'Reading each resource\u2019s usage')} ${error(this.summaryError)}
        ${this.summary ? this.renderSummary(this.summary) : nothing}
      </section>
      <section class="card" aria-label="Billing export">
        <h2>Daily billing export (FOCUS 1.2)</h2>
        <p>The provider writes each UTC day's billing in FOCUS 1.2 columns to its export bucket (docs/BILLING.md). The API
          has no route that serves an export, so the portal cannot offer it for download: operators fetch it from the bucket
          (locally <code>./dev export-download YYYY-MM-DD</code>).</p>
      </section>`;
  }

  renderStats(s) {
    const points = statsPoints(s);
    const currencies = statsCurrencies(s);
    const t = s.totals || {};
    return html`<section class="card" aria-label="Usage of the resource">
      <h2>${s.resourceId.split('/').slice(-1)[0]}: ${s.hours} hours from ${s.timespan.split('/')[0].replace('T', ' ').replace(':00:00Z', ':00 UTC')}</h2>
      <table class="totals-table" aria-label="Totals">
        <thead><tr><th scope="col">Total</th><th scope="col">Value</th></tr></thead>
        <tbody>
          ${(t.cost || []).map((c) => html`<tr><th scope="row">Cost (${c.currency})</th><td class="total-cost" data-currency=${c.currency}>${c.amount}</td></tr>`)}
          ${(t.cost || []).length ? nothing : html`<tr><th scope="row">Cost</th><td class="total-cost">none yet</td></tr>`}
          <tr><th scope="row">Device-seconds</th><td>${number(t.gpuSeconds)}</td></tr>
          <tr><th scope="row">Billable device-seconds</th><td>${number(t.billableGpuSeconds)}</td></tr>
          <tr><th scope="row">GPU-hours</th><td>${number(t.gpuHours, 6)}</td></tr>
          ${t.requests !== undefined && t.requests !== null ? html`<tr><th scope="row">Requests / tokens in / out</th><td>${number(t.requests)} / ${number(t.tokensIn)} / ${number(t.tokensOut)}</td></tr>` : nothing}
          <tr><th scope="row">Energy</th><td>${number(t.energyWh, 3)} Wh</td></tr>
        </tbody>
      </table>
      <itl-chart bars .title=${'Cost per hour'} .points=${points} .series=${currencies.map((c) => ({ key: `cost_${c}`, label: 'Cost', unit: c }))}></itl-chart>
      <itl-chart .title=${'Device-seconds per hour'} .points=${points} .series=${[{ key: 'gpuSeconds', label: 'Device-seconds' }, { key: 'billableGpuSeconds', label: 'Billable device-seconds' }]}></itl-chart>
    </section>`;
  }

  renderSummary({ spend, earnings }) {
    const rows = [...spend, ...earnings];
    const read = (list) => list.filter((r) => r.stats);
    return html`
      <p>Spend on jobs and instances: <strong class="sum-spend">${costs(sumCosts(read(spend).map((r) => r.stats.totals.cost)))}</strong>
        (${read(spend).length} of ${spend.length} readable)</p>
      <p>Node earnings: <strong class="sum-earnings">${costs(sumCosts(read(earnings).map((r) => r.stats.totals.cost)))}</strong>
        (${read(earnings).length} of ${earnings.length} readable)</p>
      <div class="table-wrap"><table class="list" aria-label="Usage per resource">
        <thead><tr><th scope="col">Resource</th><th scope="col">Kind</th><th scope="col">Cost</th><th scope="col">Device-seconds</th></tr></thead>
        <tbody>${rows.map((r) => {
          const id = parseId(r.id);
          return html`<tr><td><a href=${`#/usage?resource=${encodeURIComponent(r.id)}&hours=${this.hours}`}>${id.kind === 'instance' ? `${id.node}/` : ''}${id.name}</a></td><td>${KIND[id.kind]}</td>
            <td>${r.stats ? costs(r.stats.totals.cost) : html`<span class="muted">${r.error.code}</span>`}</td><td>${r.stats ? number(r.stats.totals.gpuSeconds) : '—'}</td></tr>`;
        })}</tbody></table></div>`;
  }
}
customElements.define('itl-usage', Usage);
