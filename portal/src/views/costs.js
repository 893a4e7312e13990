// Costs: the API's cost query (POST .../costQuery) as a form whose query the URL's hash carries (a view can be
// bookmarked), its columns and rows as a table with money beside its currency (never summed across currencies);
// the subscription's budgets with this month's spend; the GPU quotas' usage of a location. All read-only: the API
// decides who sees which charges (admins all, consumers their own work, suppliers their nodes' earnings).
import { html, nothing } from 'lit';
import { paths } from '../api.js';
import { View, loading, error, field, formValues } from '../ui.js';
import { time, number, sumCosts } from '../format.js';

export const TIMEFRAMES = [
  ['MonthToDate', 'This month so far'],
  ['WeekToDate', 'This week so far (from Monday)'],
  ['TheLastMonth', 'Last month'],
  ['Custom', 'Custom period'],
];
export const GRANULARITIES = [
  ['None', 'None (the whole period)'],
  ['Daily', 'Daily'],
  ['Monthly', 'Monthly'],
  ['Hourly', 'Hourly'],
];
export const MEASURES = [
  ['Cost', 'Cost'],
  ['GpuSeconds', 'GPU-seconds'],
  ['BillableGpuSeconds', 'Billable GPU-seconds'],
];
/** The dimensions the form offers (docs/API_REFERENCE.md, "Cost queries"); `tag:` + a key groups by a tag. */
export const DIMENSIONS = [
  ['ResourceGroupName', 'Resource group'],
  ['ResourceType', 'Resource type'],
  ['ResourceName', 'Resource name'],
  ['SubmittedBy', 'Submitted by'],
  ['NodeId', 'Node'],
  ['Supplier', 'Supplier'],
];
const TAG = 'tag:';
const COLUMN_LABELS = {
  totalCost: 'Cost',
  totalGpuSeconds: 'GPU-seconds',
  totalBillableGpuSeconds: 'Billable GPU-seconds',
  UsageDate: 'Day (UTC)',
  BillingMonth: 'Month (UTC)',
  UsageDateTime: 'Hour',
  ResourceId: 'Resource id',
  Currency: 'Currency',
  ...Object.fromEntries(DIMENSIONS),
};
const DAY = /^\d{4}-\d\d-\d\d$/;
const SLOTS = [1, 2, 3];

/** The query of a hash's parameters, with defaults: {timeframe, from, to, granularity, measure, groups, fd, fv}. */
export function queryOf(q) {
  const pick = (value, options, fallback) => (options.some(([k]) => k === value) ? value : fallback);
  return {
    timeframe: pick(q.timeframe, TIMEFRAMES, 'MonthToDate'),
    from: DAY.test(q.from || '') ? q.from : '',
    to: DAY.test(q.to || '') ? q.to : '',
    granularity: pick(q.granularity, GRANULARITIES, 'None'),
    measure: pick(q.measure, MEASURES, 'Cost'),
    groups: SLOTS.map((n) => q[`g${n}`] || '').filter(Boolean),
    fd: q.fd || '',
    fv: q.fv || '',
  };
}

/** The hash of a query (only what differs from the defaults, so a bookmark stays short). */
export function hashOf(query, location) {
  const p = new URLSearchParams();
  const put = (k, v, dflt = '') => v && v !== dflt && p.set(k, v);
  put('timeframe', query.timeframe, 'MonthToDate');
  if (query.timeframe === 'Custom') {
    put('from', query.from);
    put('to', query.to);
  }
  put('granularity', query.granularity, 'None');
  put('measure', query.measure, 'Cost');
  query.groups.forEach((g, i) => put(`g${i + 1}`, g));
  if (query.fd && query.fv.trim()) {
    put('fd', query.fd);
    put('fv', query.fv.trim());
  }
  put('location', location);
  const s = p.toString();
  return `#/costs${s ? `?${s}` : ''}`;
}

function nextDay(day) {
  const d = new Date(`${day}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + 1);
  return d.toISOString().replace('.000Z', 'Z');
}

function dayBefore(iso) {
  const d = new Date(iso);
  d.setUTCDate(d.getUTCDate() - 1);
  return d.toISOString().slice(0, 10);
}

function comparison(dimensionOrTag, values) {
  return dimensionOrTag.startsWith(TAG)
    ? { tags: { name: dimensionOrTag.slice(TAG.length), operator: 'In', values } }
    : { dimensions: { name: dimensionOrTag, operator: 'In', values } };
}

/** The body of POST .../costQuery for a query (docs/API_REFERENCE.md, "Cost queries"); `rg`: the resource group
 *  in view, which narrows the query to it. */
export function requestBody(query, rg) {
  const body = { type: 'ActualCost', timeframe: query.timeframe };
  if (query.timeframe === 'Custom') body.timePeriod = { from: `${query.from}T00:00:00Z`, to: nextDay(query.to) };
  const dataset = {
    granularity: query.granularity,
    aggregation: { [`total${query.measure}`]: { name: query.measure, function: 'Sum' } },
    grouping: query.groups.map((g) => (g.startsWith(TAG) ? { type: 'TagKey', name: g.slice(TAG.length) } : { type: 'Dimension', name: g })),
  };
  const filters = [];
  const values = query.fv.split('\n').map((v) => v.trim()).filter(Boolean);
  if (query.fd && values.length) filters.push(comparison(query.fd, values));
  if (rg) filters.push(comparison('ResourceGroupName', [rg]));
  if (filters.length === 1) dataset.filter = filters[0];
  else if (filters.length > 1) dataset.filter = { and: filters };
  body.dataset = dataset;
  return body;
}

/** A number of the answer as a plain decimal string (no exponent), for exact sums per currency. */
function decimal(n) {
  const s = String(n);
  return /e/i.test(s) ? Number(n).toFixed(12).replace(/0+$/, '').replace(/\.$/, '') : s;
}

const money = new Intl.NumberFormat(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 6 });

class Costs extends View {
  static properties = { params: {}, answer: { state: true }, draft: { state: true }, budgets: { state: true }, usages: { state: true } };

  constructor() {
    super();
    this.params = {};
    this.answer = null;
    this.budgets = null;
    this.usages = null;
  }

  connectedCallback() {
    super.connectedCallback();
    this.query = queryOf(this.params);
    this.location = (this.params.location || '').trim() || 'us-east-1';
    this.draft = { timeframe: this.query.timeframe, groups: [...this.query.groups], fd: this.query.fd };
    if (this.query.timeframe !== 'Custom' || (this.query.from && this.query.to)) this.run();
    this.track('budgets', async () => (this.budgets = await this.api.all(`${paths.sub(this.ctx.sub)}/budgets`)));
    this.loadUsages();
  }

  run() {
    const body = requestBody(this.query, this.ctx.rg);
    return this.track('query', async () => {
      this.answer = null;
      const r = await this.api.request('POST', `${paths.sub(this.ctx.sub)}/costQuery`, { body });
      this.answer = { body, result: r.body };
    });
  }

  loadUsages() {
    return this.track('usages', async () => {
      this.usages = null;
      const value = await this.api.get(`${paths.sub(this.ctx.sub)}/locations/${encodeURIComponent(this.location)}/usages`);
      this.usages = value.value;
    });
  }

  submit(e) {
    e.preventDefault();
    const v = formValues(e.target);
    const groups = SLOTS.map((n) => (v[`g${n}`] === TAG ? (v[`t${n}`] || '').trim() && TAG + v[`t${n}`].trim() : v[`g${n}`] || '')).filter(Boolean);
    const fd = v.fd === TAG ? ((v.ft || '').trim() ? TAG + v.ft.trim() : '') : v.fd || '';
    const query = { timeframe: v.timeframe, from: v.from || '', to: v.to || '', granularity: v.granularity, measure: v.measure, groups, fd, fv: v.fv || '' };
    const hash = hashOf(query, this.location === 'us-east-1' ? '' : this.location);
    if (hash === location.hash) this.run(); // the same query again: the shell keeps this view, so ask anew
    else location.hash = hash; // a new view with this query (bookmarkable)
  }

  showUsages(e) {
    e.preventDefault();
    this.location = (formValues(e.target).location || '').trim();
    // keep the bookmark in step without making the view anew (the query's answer stays)
    this.app.replaceHash(hashOf(this.query, this.location === 'us-east-1' ? '' : this.location));
    this.loadUsages();
  }

  setDraft(change) {
    this.draft = { ...this.draft, ...change };
  }

  render() {
    const where = this.ctx.rg ? `resource group ${this.ctx.rg}` : `subscription ${this.ctx.sub}`;
    return html`<h1>Costs</h1><p class="muted">${where}</p>
      ${this.renderForm()}
      <section aria-label="Cost query answer" class=${this.answer ? 'card' : ''}>
        ${loading(this.queryLoading, 'Running the cost query')} ${error(this.queryError)}
        ${this.answer ? this.renderAnswer(this.answer) : nothing}
      </section>
      ${this.renderBudgets()}
      ${this.renderUsages()}`;
  }

  renderForm() {
    const q = this.query;
    const d = this.draft;
    const groupSelect = (n) => {
      const current = d.groups[n - 1] || '';
      const isTag = current.startsWith(TAG);
      return html`<div class="group-slot">
        ${field(`Group by ${n}`, `cost-g${n}`, html`<select id="cost-g${n}" name="g${n}"
            @change=${(e) => { const groups = [...d.groups]; groups[n - 1] = e.target.value === TAG ? TAG : e.target.value; this.setDraft({ groups }); }}>
          <option value="" ?selected=${!current}>(none)</option>
          ${DIMENSIONS.map(([k, label]) => html`<option value=${k} ?selected=${current === k}>${label}</option>`)}
          <option value=${TAG} ?selected=${isTag}>A tag…</option></select>`)}
        ${isTag ? field(`Tag key ${n}`, `cost-t${n}`, html`<input id="cost-t${n}" name="t${n}" required maxlength="512" .value=${current.slice(TAG.length)} />`) : nothing}
      </div>`;
    };
    const fdIsTag = d.fd.startsWith(TAG);
    return html`<form class="card form" @submit=${(e) => this.submit(e)} aria-label="Cost query">
      <div class="grid">
        ${field('Timeframe', 'cost-timeframe', html`<select id="cost-timeframe" name="timeframe" aria-describedby="cost-timeframe-help" @change=${(e) => this.setDraft({ timeframe: e.target.value })}>
          ${TIMEFRAMES.map(([k, label]) => html`<option value=${k} ?selected=${q.timeframe === k}>${label}</option>`)}</select>`, 'Periods are UTC; figures as of the last roll-up (every 15 minutes)')}
        ${d.timeframe === 'Custom' ? html`
          ${field('From (UTC day)', 'cost-from', html`<input id="cost-from" name="from" type="date" required .value=${q.from} />`)}
          ${field('To (UTC day, included)', 'cost-to', html`<input id="cost-to" name="to" type="date" required aria-describedby="cost-to-help" .value=${q.to} />`, 'At most 366 days')}` : nothing}
        ${field('Granularity', 'cost-granularity', html`<select id="cost-granularity" name="granularity">
          ${GRANULARITIES.map(([k, label]) => html`<option value=${k} ?selected=${q.granularity === k}>${label}</option>`)}</select>`)}
        ${field('Measure', 'cost-measure', html`<select id="cost-measure" name="measure">
          ${MEASURES.map(([k, label]) => html`<option value=${k} ?selected=${q.measure === k}>${label}</option>`)}</select>`)}
      </div>
      <fieldset class="grid plain"><legend>Group by (up to 3)</legend>${SLOTS.map(groupSelect)}</fieldset>
      <fieldset class="grid plain"><legend>Filter (optional)</legend>
        ${field('Filter by', 'cost-fd', html`<select id="cost-fd" name="fd" @change=${(e) => this.setDraft({ fd: e.target.value })}>
          <option value="" ?selected=${!d.fd}>(no filter)</option>
          ${DIMENSIONS.map(([k, label]) => html`<option value=${k} ?selected=${d.fd === k}>${label}</option>`)}
          <option value=${TAG} ?selected=${fdIsTag}>A tag…</option></select>`)}
        ${fdIsTag ? field('Filter tag key', 'cost-ft', html`<input id="cost-ft" name="ft" required maxlength="512" .value=${d.fd.slice(TAG.length)} />`) : nothing}
        ${field('is one of (one value per line)', 'cost-fv', html`<textarea id="cost-fv" name="fv" rows="2" ?required=${Boolean(d.fd)} .value=${q.fv}></textarea>`)}
      </fieldset>
      <button type="submit">Run query</button>
    </form>`;
  }

  renderAnswer({ body, result }) {
    const { columns, rows } = result.properties;
    const costColumns = new Set(Object.entries(body.dataset.aggregation).filter(([, a]) => a.name === 'Cost').map(([k]) => k));
    const tagKeys = new Set(body.dataset.grouping.filter((g) => g.type === 'TagKey').map((g) => g.name));
    const currencyAt = columns.findIndex((c) => c.name === 'Currency');
    const label = (c) => (tagKeys.has(c.name) ? `Tag ${c.name}` : COLUMN_LABELS[c.name] || c.name);
    const cell = (c, v, row) => {
      if (costColumns.has(c.name)) {
        const currency = currencyAt >= 0 ? row[currencyAt] : '';
        return html`<td class="money num" data-currency=${currency} data-value=${decimal(v)} title=${`${decimal(v)} ${currency}`}>${money.format(v)}</td>`;
      }
      if (c.type === 'Number' && c.name !== 'UsageDate') return html`<td class="num">${number(v, 3)}</td>`;
      if (c.name === 'UsageDate') return html`<td>${String(v).replace(/^(\d{4})(\d\d)(\d\d)$/, '$1-$2-$3')}</td>`;
      if (c.name === 'UsageDateTime') return html`<td>${time(v, true)}</td>`;
      if (v === '' || v === null || v === undefined) return html`<td class="muted">(none)</td>`;
      return html`<td>${v}</td>`;
    };
    const costAt = columns.findIndex((c) => costColumns.has(c.name));
    // a total per currency (exact decimal sums), when there is more than one row to add up
    const totals = currencyAt >= 0 && costAt >= 0 && rows.length > 1
      ? sumCosts([rows.filter((r) => r[currencyAt]).map((r) => ({ currency: r[currencyAt], amount: decimal(r[costAt]) }))])
      : [];
    const caption = `${TIMEFRAMES.find(([k]) => k === body.timeframe)[1]}${body.timePeriod ? `: ${body.timePeriod.from.slice(0, 10)} to ${dayBefore(body.timePeriod.to)} (UTC days, both included)` : ''}`;
    return html`<h2>${caption}</h2>
      ${rows.length
        ? html`<p class="muted small" role="status">${rows.length} ${rows.length === 1 ? 'row' : 'rows'}${currencyAt >= 0 ? '; amounts in the currency of their row, never added across currencies' : ''}.</p>
          <div class="table-wrap"><table class="list cost-rows" aria-label="Costs">
            <thead><tr>${columns.map((c) => html`<th scope="col" class=${c.type === 'Number' && c.name !== 'UsageDate' ? 'num' : ''}>${label(c)}</th>`)}</tr></thead>
            <tbody>${rows.map((row) => html`<tr>${columns.map((c, i) => cell(c, row[i], row))}</tr>`)}</tbody>
            ${totals.length
              ? html`<tfoot>${totals.map((t) => html`<tr class="cost-total"><th scope="row" colspan=${columns.length - 1}>Total in ${t.currency}</th>
                  <td class="money num" data-currency=${t.currency} data-value=${t.amount}>${money.format(Number(t.amount))}</td></tr>`)}</tfoot>`
              : nothing}
          </table></div>`
        : html`<p class="empty" role="status">No ${body.dataset.aggregation[Object.keys(body.dataset.aggregation)[0]].name === 'Cost' ? 'costs' : 'usage'} in this period that you may see. Work that ended since the last roll-up (every 15 minutes) is counted after the next one.</p>`}`;
  }

  renderBudgets() {
    const list = this.budgets || [];
    const covers = (f) => {
      if (!f) return 'the subscription';
      if (f.dimensions) return `resource groups ${f.dimensions.values.join(', ')}`;
      return `tag ${f.tags.name} = ${f.tags.values.join(', ')}`;
    };
    return html`<section class="card" aria-label="Budgets">
      <h2>Budgets of subscription ${this.ctx.sub}</h2>
      ${loading(this.budgetsLoading, 'Loading budgets')} ${error(this.budgetsError)}
      ${this.budgets && !list.length ? html`<p class="empty">No budgets. Admins set them through the API (docs/API_REFERENCE.md, "Budgets").</p>` : nothing}
      ${list.length ? html`<div class="table-wrap"><table class="list" aria-label="Budgets">
        <thead><tr><th scope="col">Budget</th><th scope="col">Covers</th><th scope="col" class="num">Amount</th><th scope="col" class="num">Spent this month</th>
          <th scope="col">Thresholds crossed</th><th scope="col">Exceeded</th><th scope="col">At the limit</th></tr></thead>
        <tbody>${list.map((b) => {
          const p = b.properties;
          const spend = p.currentSpend || { amount: 0, unit: p.currency };
          const pct = Number(p.amount) ? Math.round((Number(spend.amount) / Number(p.amount)) * 100) : 0;
          const crossed = (p.status && p.status.thresholdsCrossed) || [];
          return html`<tr data-budget=${b.name}>
            <th scope="row">${b.name}</th><td>${covers(p.filter)}</td>
            <td class="money num budget-amount">${p.amount} ${p.currency}</td>
            <td class="money num budget-spend">${spend.amount} ${spend.unit} <span class="muted small">(${pct} %)</span></td>
            <td>${crossed.length ? crossed.map((t) => `${t} %`).join(', ') : html`<span class="muted">none</span>`}</td>
            <td class="budget-exceeded">${p.status && p.status.exceeded ? html`<span class="badge badge-bad">Exceeded</span>` : 'No'}</td>
            <td>${p.actionAtLimit || 'None'}</td></tr>`;
        })}</tbody></table></div>
        <p class="muted small">Spend is this calendar month's (UTC) in each budget's currency, as of the budget monitor's last evaluation (every 15 minutes).</p>` : nothing}
    </section>`;
  }

  renderUsages() {
    return html`<section class="card" aria-label="GPU quotas">
      <h2>GPU quotas of subscription ${this.ctx.sub} in ${this.location}</h2>
      <form class="form inline" @submit=${(e) => this.showUsages(e)} aria-label="Choose location">
        ${field('Location', 'quota-location', html`<input id="quota-location" name="location" required pattern="[A-Za-z0-9][A-Za-z0-9 _\\-]*" maxlength="64" .value=${this.location} />`)}
        <button type="submit" class="secondary">Show quotas</button>
      </form>
      ${loading(this.usagesLoading, 'Loading quota usage')} ${error(this.usagesError)}
      ${this.usages ? html`<div class="table-wrap"><table class="list" aria-label="GPU quota usage">
        <thead><tr><th scope="col">Quota</th><th scope="col" class="num">GPUs held</th><th scope="col" class="num">Limit</th></tr></thead>
        <tbody>${this.usages.map((u) => html`<tr data-quota=${u.name.value}>
          <th scope="row">${u.name.localizedValue || u.name.value} <span class="muted small"><code>${u.name.value}</code></span></th>
          <td class="num quota-current">${u.currentValue}</td>
          <td class="num quota-limit">${u.limit < 0 ? html`<span class="muted">none set</span>` : u.limit}</td></tr>`)}</tbody>
      </table></div>` : nothing}
    </section>`;
  }
}
customElements.define('itl-costs', Costs);
