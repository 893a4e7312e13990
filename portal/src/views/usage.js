// Usage and cost: one resource's hourly usage over `hours` with the API's totals per currency; what the caller was
// billed over the same hours in the subscription or resource group, per resource (the cost query's answer, deleted
// resources included); the subscription's FOCUS billing file of a day, downloaded as the API serves it.
import { html, nothing } from 'lit';
import Papa from 'papaparse';
import { parseId, paths } from '../api.js';
import { View, loading, error, field, formValues, saveFile, link } from '../ui.js';
import { costs, number, time, clock } from '../format.js';
import { fitStats, statsCurrencies } from '../chart.js';
import { mayReadNodeStats, reason } from '../permissions.js';
import { instanceCostNote } from './instances.js';
import { inventory, billedRows, billedTotals } from './spend.js';
import { lastHoursLink, decimal, totalsByCurrency } from './costs.js';
import '../chart.js';

const KIND = { node: 'Node', instance: 'Instance', job: 'Job' };

/** Yesterday's UTC date, YYYY-MM-DD: the newest day usually exported. */
function yesterday() {
  return new Date(Date.now() - 86400000).toISOString().slice(0, 10);
}

class Usage extends View {
  static properties = { resourceId: {}, hours: {}, inv: { state: true }, stats: { state: true }, summary: { state: true }, bill: { state: true } };

  constructor() {
    super();
    this.inv = null;
    this.stats = null;
    this.summary = null;
    this.bill = null;
  }

  connectedCallback() {
    super.connectedCallback();
    this.track('inv', async () => (this.inv = await inventory(this.api, this.ctx)));
    const target = parseId(this.resourceId);
    // a node's figures are for admins and its supplier: a role that may read no node's is not sent to ask (403)
    this.refusal = target && target.kind === 'node' && !this.app.may('nodes/stats') ? reason('nodes/stats') : null;
    if (this.resourceId && !this.refusal) this.loadStats();
  }

  loadStats() {
    const target = parseId(this.resourceId);
    return this.track('stats', async () => {
      this.stats = null;
      this.job = null;
      // a job's own cost (so far while it runs) beside the roll-up's totals, which trail it
      const [stats, job] = await Promise.all([
        this.api.get(`${this.resourceId}/stats`, { hours: this.hours }),
        target && target.kind === 'job' ? this.api.get(paths.job(target.sub, target.rg, target.name)).catch(() => null) : null,
      ]);
      this.stats = stats;
      this.job = job;
    });
  }

  show(e) {
    e.preventDefault();
    const v = formValues(e.target);
    location.hash = `#/usage?resource=${encodeURIComponent(v.resource)}&hours=${encodeURIComponent(v.hours)}`;
  }

  summarise() {
    return this.track('summary', async () => (this.summary = await billedRows(this.api, this.ctx, this.hours, ['ResourceId'])));
  }

  /** Every page of the subscription's billing file of the form's day (`GET .../billingExports/{day}`, following
   *  nextLink), saved as one CSV: the FOCUS header and each cell exactly as the API gives it (the provider's own file
   *  format, RFC 4180; cells are not altered against spreadsheet formulae: a FinOps tool reads them as written). */
  downloadBill(e) {
    e.preventDefault();
    const { day } = formValues(e.target);
    const sub = this.ctx.sub;
    return this.track('bill', async () => {
      this.bill = null;
      let page = await this.api.get(paths.billingExport(sub, day));
      const fields = page.properties.columns.map((c) => c.name);
      const rows = [...page.properties.rows];
      while (page.properties.nextLink) {
        page = await this.api.get(page.properties.nextLink);
        rows.push(...page.properties.rows);
      }
      saveFile(Papa.unparse({ fields, data: rows }), `itl-accelerator-focus-${sub}-${day}.csv`);
      this.bill = { day, rows: rows.length, totals: totalsByCurrency(rows, fields.indexOf('BilledCost'), fields.indexOf('BillingCurrency')) };
    });
  }

  /** What the caller may read the usage of: every instance and job listed (the API lists those it may see), and the
   *  nodes whose figures are its (admins all, a supplier its own: permissions.js). */
  options() {
    if (!this.inv) return [];
    const identity = this.app.auth.identity;
    const nodes = this.inv.nodes.filter((n) => mayReadNodeStats(identity, n));
    return [...nodes, ...this.inv.instances, ...this.inv.jobs].map((r) => {
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
          <option value="">Choose ${this.app.may('nodes/stats') ? 'a node, instance or job' : 'an instance or job'}</option>
          ${[...chosen, ...opts].map((o) => html`<option value=${o.id} ?selected=${o.id.toLowerCase() === (this.resourceId || '').toLowerCase()}>${o.label}</option>`)}</select>`)}
        ${field('Hours', 'usage-hours', html`<input id="usage-hours" name="hours" type="number" min="1" max="720" step="1" required .value=${String(this.hours)} />`, '1–720, up to and including the current hour (UTC)')}
        <button type="submit">Show usage</button>
      </form>
      ${loading(this.invLoading, 'Loading resources')} ${error(this.invError)}
      ${this.refusal ? html`<p class="not-offered" role="status">${this.refusal} Your usage is that of your jobs${this.app.may('charges/all') ? '' : ' and the instances you may see'}.</p>` : nothing}
      ${loading(this.statsLoading, 'Loading usage')} ${error(this.statsError)}
      ${this.stats ? this.renderStats(this.stats) : nothing}
      <section class="card" aria-label="Across the subscription">
        <h2>Billed to you in ${this.ctx.rg ? `resource group ${this.ctx.rg}` : `subscription ${this.ctx.sub}`}, last ${this.hours} h</h2>
        <button class="secondary" @click=${() => this.summarise()} ?disabled=${this.summaryLoading}>Show what you were billed, per resource</button>
        <a href=${lastHoursLink(this.hours)}>Cost per hour of all of it, last ${this.hours} h</a>
        ${loading(this.summaryLoading, 'Asking the cost query')} ${error(this.summaryError)}
        ${this.summary ? this.renderSummary(this.summary) : nothing}
      </section>
      <section class="card" aria-label="Billing file">
        <h2>Billing file of a day (FOCUS 1.2)</h2>
        <p>Your rows of the provider's daily billing export for subscription ${this.ctx.sub}, as they were billed: your own
          work, or your nodes' earnings, or — for admins — all of it (docs/BILLING.md). A UTC day is exported once it has
          ended, about 01:30 UTC the next day; changes after that come in a later day's file as corrections.</p>
        <form class="form inline" @submit=${(e) => this.downloadBill(e)} aria-label="Download a billing file">
          ${field('Day (UTC)', 'bill-day', html`<input id="bill-day" name="day" type="date" required .value=${yesterday()} />`)}
          <button type="submit" ?disabled=${this.billLoading}>Download CSV</button>
        </form>
        ${loading(this.billLoading, 'Reading the billing file')} ${error(this.billError)}
        ${this.bill ? html`<p class="bill-summary" role="status">Saved the billing file of ${this.bill.day}: ${this.bill.rows} rows${this.bill.rows ? html`, billed <strong>${costs(this.bill.totals)}</strong>` : ''}.</p>` : nothing}
      </section>`;
  }

  renderStats(s) {
    const fit = fitStats(s);
    const currencies = statsCurrencies(s);
    const t = s.totals || {};
    const target = parseId(s.resourceId);
    const job = this.job && this.job.properties;
    return html`<section class="card" aria-label="Usage of the resource">
      <h2>${s.resourceId.split('/').slice(-1)[0]}: ${s.hours} hours from ${s.timespan.split('/')[0].replace('T', ' ').replace(':00:00Z', ':00 UTC')}</h2>
      ${job && job.cost ? html`<p class="job-own-cost">The job's cost${job.costAsOf ? html` so far: <strong class="money">${job.cost.amount} ${job.cost.currency}</strong> (as of ${clock(job.costAsOf)})` : html`: <strong class="money">${job.cost.amount} ${job.cost.currency}</strong> (final)`}
        — as on <a href=${link('jobs', target.rg, target.name)}>its page</a>. The totals below are the hourly roll-up's, which runs every 15 minutes${job.costAsOf ? ' and trails it while the job runs' : ''}.</p>` : nothing}
      <table class="totals-table" aria-label="Totals">
        <thead><tr><th scope="col">Total of the hourly roll-up</th><th scope="col">Value</th></tr></thead>
        <tbody>
          ${(t.cost || []).map((c) => html`<tr><th scope="row">Cost (${c.currency})</th><td class="total-cost" data-currency=${c.currency}>${c.amount}${target && target.kind === 'instance' ? instanceCostNote(this.app) : nothing}</td></tr>`)}
          ${(t.cost || []).length ? nothing : html`<tr><th scope="row">Cost</th><td class="total-cost">none yet</td></tr>`}
          <tr><th scope="row">Device-seconds</th><td>${number(t.gpuSeconds)}</td></tr>
          <tr><th scope="row">Billable device-seconds</th><td>${number(t.billableGpuSeconds)}</td></tr>
          <tr><th scope="row">Device-hours</th><td>${number(t.gpuHours, 6)}</td></tr>
          ${t.requests !== undefined && t.requests !== null ? html`<tr><th scope="row">Requests / tokens in / out</th><td>${number(t.requests)} / ${number(t.tokensIn)} / ${number(t.tokensOut)}</td></tr>` : nothing}
          <tr><th scope="row">Energy</th><td>${number(t.energyWh, 3)} Wh</td></tr>
        </tbody>
      </table>
      <itl-chart bars .title=${`Cost per ${fit.per}`} .points=${fit.points} .step=${fit.step} .note=${fit.note} .series=${currencies.map((c) => ({ key: `cost_${c}`, label: 'Cost', unit: c }))}></itl-chart>
      <itl-chart .title=${`Device-seconds per ${fit.per}`} .points=${fit.points} .step=${fit.step} .note=${fit.note} .series=${[{ key: 'gpuSeconds', label: 'Device-seconds' }, { key: 'billableGpuSeconds', label: 'Billable device-seconds' }]}></itl-chart>
    </section>`;
  }

  /** The cost query's rows by resource: what the caller pays (its work) or earns (its nodes'), deleted resources
   *  included, with the exact total per currency. */
  renderSummary(answer) {
    const at = (name) => answer.columns.findIndex((c) => c.name === name);
    const [cost, resource, currency] = [at('totalCost'), at('ResourceId'), at('Currency')];
    const total = billedTotals(answer);
    return html`
      <p>Total: <strong class="sum-spend">${costs(total)}</strong> <span class="small muted">(the cost query's answer for you, asked ${time(answer.asOf, true)};
        usage is rolled up every 15 minutes)</span></p>
      <div class="table-wrap"><table class="list" aria-label="Billed per resource">
        <thead><tr><th scope="col">Resource</th><th scope="col">Kind</th><th scope="col">Cost</th></tr></thead>
        <tbody>${answer.rows.map((row) => {
          const id = parseId(row[resource]);
          const name = id ? `${id.kind === 'instance' ? `${id.node}/` : ''}${id.name}` : row[resource];
          return html`<tr><td><a href=${`#/usage?resource=${encodeURIComponent(row[resource])}&hours=${this.hours}`}>${name}</a></td><td>${id ? KIND[id.kind] : ''}</td>
            <td class="money" data-currency=${row[currency]}>${decimal(row[cost])} ${row[currency]}</td></tr>`;
        })}</tbody></table></div>`;
  }
}
customElements.define('itl-usage', Usage);
