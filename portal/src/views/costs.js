// Costs: the API's cost query (POST .../costQuery) as a form whose query the URL's hash carries (a view can be
// bookmarked), hourly or daily answers as a chart (a series per currency, never summed across currencies; per group
// value for one grouping), its columns and rows as a table with money beside its currency; the subscription's
// budgets with this month's spend, set, changed and removed by admins; the accelerator quotas' usage of a location,
// their limits set and removed by admins. The API decides who sees
// which charges (admins all, consumers their own work, suppliers their nodes' earnings).
import { html, nothing } from 'lit';
import { paths } from '../api.js';
import { View, loading, error, field, formValues, offered, confirmed, saveFile, NAME_PATTERN, NAME_HELP } from '../ui.js';
import { time, number, sumCosts } from '../format.js';
import { HOURLY_UP_TO } from '../chart.js';
import Papa from 'papaparse';

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
  ['GpuSeconds', 'Device-seconds'],
  ['BillableGpuSeconds', 'Billable device-seconds'],
];
/** The dimensions the form offers (docs/API_REFERENCE.md, "Cost queries"); `tag:` + a key groups by a tag. */
export const DIMENSIONS = [
  ['ResourceGroupName', 'Resource group'],
  ['ResourceType', 'Resource type'],
  ['ResourceName', 'Resource name'],
  ['SubmittedBy', 'Submitted by'],
  ['NodeId', 'Node'],
  ['Supplier', 'Supplier'],
  ['AcceleratorKind', 'Accelerator kind'],
  ['AcceleratorModel', 'Accelerator model'],
];
const TAG = 'tag:';
const COLUMN_LABELS = {
  totalCost: 'Cost',
  totalGpuSeconds: 'Device-seconds',
  totalBillableGpuSeconds: 'Billable device-seconds',
  UsageDate: 'Day (UTC)',
  BillingMonth: 'Month (UTC)',
  UsageDateTime: 'Hour',
  ResourceId: 'Resource id',
  Currency: 'Currency',
  ...Object.fromEntries(DIMENSIONS),
};
const DAY = /^\d{4}-\d\d-\d\d$/;
const SLOTS = [1, 2, 3];
/** The most hours a rolling custom period covers: the API's longest period (366 days). */
export const MAX_HOURS = 366 * 24;
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** `hours` of a hash: a whole number 1–MAX_HOURS as a string, else ''. */
function hoursOf(v) {
  return /^\d+$/.test(v || '') && Number(v) >= 1 && Number(v) <= MAX_HOURS ? String(Number(v)) : '';
}

/** The link to the Costs view's hourly chart of the last `hours` (rolling: the bookmark stays "the last N h"). */
export function lastHoursLink(hours) {
  return `#/costs?timeframe=Custom&hours=${hoursOf(String(hours)) || 24}&granularity=Hourly`;
}

/** The query of a hash's parameters, with defaults: {timeframe, from, to, hours, granularity, measure, groups, fd,
 *  fv}. A custom period is either UTC days (from, to) or the last `hours` up to and including the current hour. */
export function queryOf(q) {
  const pick = (value, options, fallback) => (options.some(([k]) => k === value) ? value : fallback);
  return {
    timeframe: pick(q.timeframe, TIMEFRAMES, 'MonthToDate'),
    from: DAY.test(q.from || '') ? q.from : '',
    to: DAY.test(q.to || '') ? q.to : '',
    hours: q.timeframe === 'Custom' ? hoursOf(q.hours) : '',
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
  if (query.timeframe === 'Custom' && query.hours) put('hours', query.hours);
  else if (query.timeframe === 'Custom') {
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

const utc = (ms) => new Date(ms).toISOString().replace('.000Z', 'Z');

function comparison(dimensionOrTag, values) {
  return dimensionOrTag.startsWith(TAG)
    ? { tags: { name: dimensionOrTag.slice(TAG.length), operator: 'In', values } }
    : { dimensions: { name: dimensionOrTag, operator: 'In', values } };
}

/** The body of POST .../costQuery for a query (docs/API_REFERENCE.md, "Cost queries"); `rg`: the resource group
 *  in view, which narrows the query to it. The last `hours` end with the current hour (UTC), as a resource's stats. */
export function requestBody(query, rg, now = new Date()) {
  const body = { type: 'ActualCost', timeframe: query.timeframe };
  if (query.timeframe === 'Custom' && query.hours) {
    const end = Math.floor(now.getTime() / HOUR_MS) * HOUR_MS + HOUR_MS;
    body.timePeriod = { from: utc(end - Number(query.hours) * HOUR_MS), to: utc(end) };
  } else if (query.timeframe === 'Custom') body.timePeriod = { from: `${query.from}T00:00:00Z`, to: nextDay(query.to) };
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

/** [{currency, amount}]: the exact decimal sum per currency of the cost in column `costAt` of `rows`, with its
 *  currency in column `currencyAt` (rows without one are left out; amounts are never added across currencies). */
export function totalsByCurrency(rows, costAt, currencyAt) {
  return sumCosts([rows.filter((r) => r[currencyAt]).map((r) => ({ currency: r[currencyAt], amount: decimal(r[costAt]) }))]);
}

/** A number of the answer as a plain decimal string (no exponent), for exact sums per currency. */
export function decimal(n) {
  const s = String(n);
  return /e/i.test(s) ? Number(n).toFixed(12).replace(/0+$/, '').replace(/\.$/, '') : s;
}

const money = new Intl.NumberFormat(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 6 });

/** The most group values a chart draws as series of their own (per currency); the rest add up as "other". */
export const CHART_GROUPS = 6;
const STEP_MS = { Hourly: HOUR_MS, Daily: DAY_MS };

/** [start, end) of a query body in epoch ms, as the API reads it (services/api/costs.py period_of), by `now`. */
export function periodOf(body, now = new Date()) {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  const today = Date.UTC(y, m, now.getUTCDate());
  switch (body.timeframe) {
    case 'Custom':
      return [Date.parse(body.timePeriod.from), Date.parse(body.timePeriod.to)];
    case 'TheLastMonth':
      return [Date.UTC(y, m - 1, 1), Date.UTC(y, m, 1)];
    case 'WeekToDate':
      return [today - ((now.getUTCDay() + 6) % 7) * DAY_MS, now.getTime()];
    default:
      return [Date.UTC(y, m, 1), now.getTime()];
  }
}

/**
 * What a chart of an hourly or daily answer draws, or null for other granularities: {step, points, series, totals,
 * measure, overGroups}. A series per currency when the measure is Cost (amounts are never added across
 * currencies); with one grouping, per group value too — the CHART_GROUPS largest of each currency, the others added
 * up as one "other" series; with more groupings, the totals over the groups. Every bucket of the period is a
 * point (0 where the answer has no row). `totals`: the exact sums per currency (or of the measure), as the table's.
 */
export function chartOf(body, { columns, rows }, now = new Date()) {
  const granularity = body.dataset.granularity;
  const stepMs = STEP_MS[granularity];
  if (!stepMs) return null;
  const [measureKey, aggregation] = Object.entries(body.dataset.aggregation)[0];
  const measure = aggregation.name;
  const valueAt = columns.findIndex((c) => c.name === measureKey);
  const timeAt = columns.findIndex((c) => c.name === (granularity === 'Hourly' ? 'UsageDateTime' : 'UsageDate'));
  const currencyAt = measure === 'Cost' ? columns.findIndex((c) => c.name === 'Currency') : -1;
  const grouping = body.dataset.grouping;
  const groupAt = grouping.length === 1 ? timeAt + 1 : -1; // columns: measures, time, groups, currency
  const msOf = granularity === 'Hourly'
    ? (v) => Date.parse(v)
    : (v) => { const s = String(v); return Date.UTC(Number(s.slice(0, 4)), Number(s.slice(4, 6)) - 1, Number(s.slice(6, 8))); };
  const measureLabel = MEASURES.find(([k]) => k === measure)[1];
  const format = measure === 'Cost' ? (v) => money.format(v) : (v) => number(v, 3);
  const counted = rows.filter((r) => currencyAt < 0 || r[currencyAt]); // a row without a currency charged nothing
  const currencies = currencyAt >= 0 ? [...new Set(counted.map((r) => r[currencyAt]))].sort() : [''];
  const series = [];
  const keys = new Map(); // currency + '\0' + group value → series key
  for (const currency of currencies) {
    const add = (label, groups) => {
      const key = `s${series.length}`;
      series.push({ key, label, unit: currency, format });
      for (const g of groups) keys.set(`${currency}\0${g}`, key);
    };
    const mine = counted.filter((r) => currencyAt < 0 || r[currencyAt] === currency);
    if (groupAt < 0) {
      add(measureLabel, ['']);
      continue;
    }
    const byGroup = new Map();
    for (const r of mine) byGroup.set(r[groupAt], (byGroup.get(r[groupAt]) || 0) + Number(r[valueAt]));
    const ranked = [...byGroup].filter(([, v]) => v).sort((a, b) => b[1] - a[1] || String(a[0]).localeCompare(String(b[0])));
    ranked.slice(0, CHART_GROUPS).forEach(([g]) => add(g === '' ? '(none)' : String(g), [g]));
    const rest = ranked.slice(CHART_GROUPS).map(([g]) => g);
    if (rest.length) add(`Other (${rest.length} more)`, rest);
  }
  // every bucket of the period (the API's rows too, should the browser's clock differ), each series at 0
  const [start, end] = periodOf(body, now);
  const buckets = new Set();
  for (let t = Math.floor(start / stepMs) * stepMs; t < end && buckets.size <= MAX_HOURS; t += stepMs) buckets.add(t);
  for (const r of counted) buckets.add(msOf(r[timeAt]));
  const points = new Map([...buckets].sort((a, b) => a - b).map((t) => [t, Object.fromEntries([['t', t / 1000], ...series.map((s) => [s.key, 0])])]));
  for (const r of counted) {
    const key = keys.get(`${currencyAt >= 0 ? r[currencyAt] : ''}\0${groupAt >= 0 ? r[groupAt] : ''}`);
    if (key) points.get(msOf(r[timeAt]))[key] += Number(r[valueAt]);
  }
  const totals = sumCosts([counted.map((r) => ({ currency: currencyAt >= 0 ? r[currencyAt] : '', amount: decimal(r[valueAt]) }))]);
  // an hourly answer over more than HOURLY_UP_TO hours is drawn per UTC day (the table keeps every hour): a month
  // of hours would be bars a pixel wide, and a few hours of work a sliver at the end
  const hours = Math.round((end - start) / HOUR_MS);
  const perDay = granularity === 'Hourly' && hours > HOURLY_UP_TO;
  let drawn = [...points.values()];
  if (perDay) {
    const days = new Map();
    for (const p of drawn) {
      const t = Math.floor(p.t / 86400) * 86400;
      const day = days.get(t) || Object.fromEntries([['t', t], ...series.map((x) => [x.key, 0])]);
      for (const x of series) day[x.key] += p[x.key];
      days.set(t, day);
    }
    drawn = [...days.values()];
  }
  return {
    step: granularity === 'Hourly' && !perDay ? 'hour' : 'day',
    perDay: perDay ? hours : 0,
    points: drawn,
    series: series.length && totals.some((t) => Number(t.amount)) ? series : [],
    totals,
    measure,
    overGroups: grouping.length > 1,
  };
}

class Costs extends View {
  static properties = {
    params: {}, answer: { state: true }, draft: { state: true }, budgets: { state: true }, usages: { state: true },
    budgetForm: { state: true }, quotaForm: { state: true }, saved: { state: true },
  };

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
    this.draft = { timeframe: this.query.timeframe, groups: [...this.query.groups], fd: this.query.fd, hours: this.query.hours };
    if (this.query.timeframe !== 'Custom' || this.query.hours || (this.query.from && this.query.to)) this.run();
    this.loadBudgets();
    this.loadUsages();
  }

  loadBudgets() {
    return this.track('budgets', async () => (this.budgets = await this.api.all(`${paths.sub(this.ctx.sub)}/budgets`)));
  }

  /** PUT .../budgets/{name} from the budget form (docs/API_REFERENCE.md, "Budgets"): the API answers with its
   *  spend as of that moment, and refuses what it refuses (400 naming the field) shown as it said it. */
  async saveBudget(e) {
    e.preventDefault();
    const v = formValues(e.target);
    const groups = (v.groups || '').split(/[\s,]+/).filter(Boolean);
    const emails = (v.emails || '').split(/[\s,;]+/).filter(Boolean);
    // a change keeps what the form does not show: the other notifications (under their own names), a tag filter
    const was = (this.budgetForm && this.budgetForm.properties) || {};
    const notifications = { ...(was.notifications || {}) };
    const first = Object.keys(notifications)[0] || `at${String(v.threshold || '').replace('.', '_')}`;
    if (v.threshold) notifications[first] = { enabled: true, operator: 'GreaterThanOrEqualTo', ...notifications[first], threshold: Number(v.threshold), contactEmails: emails };
    else delete notifications[first];
    const filter = groups.length ? { dimensions: { name: 'ResourceGroupName', operator: 'In', values: groups } } : was.filter && was.filter.tags ? was.filter : null;
    const properties = {
      category: 'Cost',
      amount: v.amount,
      currency: v.currency,
      timeGrain: 'Monthly',
      timePeriod: { startDate: `${v.start}-01T00:00:00Z`, ...(v.end ? { endDate: `${v.end}-01T00:00:00Z` } : {}) },
      actionAtLimit: v.action,
      notifications,
      ...(filter ? { filter } : {}),
    };
    const r = await this.track('budgetSave', () => this.api.request('PUT', `${paths.sub(this.ctx.sub)}/budgets/${encodeURIComponent(v.name)}`, { body: { properties } }));
    if (r) {
      this.saved = `Budget ${v.name} ${r.status === 201 ? 'created' : 'saved'}.`;
      this.budgetForm = null;
      this.loadBudgets();
    }
  }

  async removeBudget(name) {
    const r = await this.track('budgetSave', () => this.api.request('DELETE', `${paths.sub(this.ctx.sub)}/budgets/${encodeURIComponent(name)}`));
    if (r) {
      this.saved = `Budget ${name} removed.`;
      this.loadBudgets();
    }
  }

  quotaPath(name) {
    return `${paths.sub(this.ctx.sub)}/locations/${encodeURIComponent(this.location)}/quotas/${encodeURIComponent(name)}`;
  }

  async saveQuota(e) {
    e.preventDefault();
    const v = formValues(e.target);
    const body = { properties: { limit: { limitObjectType: 'LimitValue', value: Number(v.limit) } } };
    const r = await this.track('quotaSave', () => this.api.request('PUT', this.quotaPath(v.name), { body }));
    if (r) {
      this.saved = `Quota ${v.name} in ${this.location} set to ${v.limit}.`;
      this.quotaForm = null;
      this.loadUsages();
    }
  }

  async removeQuota(name) {
    const r = await this.track('quotaSave', () => this.api.request('DELETE', this.quotaPath(name)));
    if (r) {
      this.saved = `Quota ${name} in ${this.location} removed.`;
      this.loadUsages();
    }
  }

  run() {
    const body = requestBody(this.query, this.ctx.rg);
    return this.track('query', async () => {
      this.answer = null;
      const r = await this.api.request('POST', `${paths.sub(this.ctx.sub)}/costQuery`, { body });
      this.answer = { body, result: r.body, chart: chartOf(body, r.body.properties) };
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
    const hours = v.timeframe === 'Custom' ? hoursOf(v.hours) : '';
    const query = { timeframe: v.timeframe, from: hours ? '' : v.from || '', to: hours ? '' : v.to || '', hours, granularity: v.granularity, measure: v.measure, groups, fd, fv: v.fv || '' };
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
          ${field('From (UTC day)', 'cost-from', html`<input id="cost-from" name="from" type="date" ?required=${!d.hours} ?disabled=${Boolean(d.hours)} .value=${q.from} />`)}
          ${field('To (UTC day, included)', 'cost-to', html`<input id="cost-to" name="to" type="date" ?required=${!d.hours} ?disabled=${Boolean(d.hours)} aria-describedby="cost-to-help" .value=${q.to} />`, 'At most 366 days')}
          ${field('Or the last hours', 'cost-hours', html`<input id="cost-hours" name="hours" type="number" min="1" max=${MAX_HOURS} step="1" aria-describedby="cost-hours-help" .value=${q.hours}
              @input=${(e) => this.setDraft({ hours: e.target.value.trim() })} />`, `Instead of days: 1–${MAX_HOURS}, up to and including the current hour (UTC)`)}` : nothing}
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

  renderAnswer({ body, result, chart }) {
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
    const totals = currencyAt >= 0 && costAt >= 0 && rows.length > 1 ? totalsByCurrency(rows, costAt, currencyAt) : [];
    const period = !body.timePeriod ? ''
      : this.query.hours ? `: the last ${this.query.hours} hours, ${body.timePeriod.from.slice(0, 13).replace('T', ' ')}:00 to ${body.timePeriod.to.slice(0, 13).replace('T', ' ')}:00 UTC`
        : `: ${body.timePeriod.from.slice(0, 10)} to ${dayBefore(body.timePeriod.to)} (UTC days, both included)`;
    const caption = `${TIMEFRAMES.find(([k]) => k === body.timeframe)[1]}${period}`;
    return html`<h2>${caption}</h2>
      ${rows.length ? html`<p><button type="button" class="secondary" @click=${() => downloadCsv(columns, rows, body)}>Download CSV</button>
        <span class="small muted">the rows as the API answered them, one per line (RFC 4180)</span></p>` : nothing}
      ${chart ? this.renderChart(chart, rows.length) : nothing}
      ${rows.length
        ? html`<p class="muted small" role="status">${rows.length} ${rows.length === 1 ? 'row' : 'rows'}${currencyAt >= 0 ? '; amounts in the currency of their row, never added across currencies' : ''}.</p>
          <div class="table-wrap" tabindex="0"><table class="list cost-rows" aria-label="Costs">
            <thead><tr>${columns.map((c) => html`<th scope="col" class=${c.type === 'Number' && c.name !== 'UsageDate' ? 'num' : ''}>${label(c)}</th>`)}</tr></thead>
            <tbody>${rows.map((row) => html`<tr>${columns.map((c, i) => cell(c, row[i], row))}</tr>`)}</tbody>
            ${totals.length
              ? html`<tfoot>${totals.map((t) => html`<tr class="cost-total"><th scope="row" colspan=${columns.length - 1}>Total in ${t.currency}</th>
                  <td class="money num" data-currency=${t.currency} data-value=${t.amount}>${money.format(Number(t.amount))}</td></tr>`)}</tfoot>`
              : nothing}
          </table></div>`
        : html`<p class="empty" role="status">No ${body.dataset.aggregation[Object.keys(body.dataset.aggregation)[0]].name === 'Cost' ? 'costs' : 'usage'} in this period that you may see. Work that ended since the last roll-up (every 15 minutes) is counted after the next one.</p>`}`;
  }

  /** The answer per hour or day as a chart; its caption (the chart's text alternative) the totals, per currency. */
  renderChart(chart, rowCount) {
    const measure = MEASURES.find(([k]) => k === chart.measure)[1];
    const title = `${measure} per ${chart.step === 'hour' ? 'hour' : 'day (UTC)'}${chart.overGroups ? ', all groups together' : ''}`;
    const total = (t) => html`<span class="chart-total money" data-currency=${t.currency} data-value=${t.amount}>${chart.measure === 'Cost' ? `${money.format(Number(t.amount))} ${t.currency}` : `${number(Number(t.amount), 3)} ${measure}`}</span>`;
    const granularity = chart.perDay
      ? html` <span class="small muted chart-granularity">(the hourly answer drawn per UTC day: ${chart.perDay} hours are more than ${HOURLY_UP_TO / 24} days; the table below has every hour)</span>`
      : nothing;
    const note = chart.totals.length
      ? html`— ${chart.measure === 'Cost' && chart.totals.length > 1 ? 'totals' : 'total'}: ${chart.totals.map((t, i) => html`${i ? '; ' : ''}${total(t)}`)}${chart.measure === 'Cost' && chart.totals.length > 1 ? ' (never added across currencies)' : ''}${granularity}`
      : granularity;
    const empty = rowCount ? `Nothing to draw: every ${chart.step} of this answer is 0.` : `Nothing to draw: the query answered no ${chart.step === 'hour' || chart.perDay ? 'hours' : 'days'}.`;
    return html`<itl-chart .title=${title} .note=${note} .step=${chart.step} .points=${chart.points} .series=${chart.series}
      .empty=${empty} ?bars=${chart.series.length === 1}></itl-chart>`;
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
      <div class="toolbar">${offered(this.app, 'budgets/write', 'Set a budget', html`<button @click=${() => (this.budgetForm = this.budgetForm ? null : {})} aria-expanded=${Boolean(this.budgetForm)}>Set a budget</button>`)}</div>
      ${this.budgetForm ? this.renderBudgetForm(this.budgetForm) : nothing}
      ${error(this.budgetSaveError)}
      ${this.saved ? html`<p class="ok" role="status">${this.saved}</p>` : nothing}
      ${this.budgets && !list.length ? html`<p class="empty">No budgets.</p>` : nothing}
      ${list.length ? html`<div class="table-wrap" tabindex="0"><table class="list" aria-label="Budgets">
        <thead><tr><th scope="col">Budget</th><th scope="col">Covers</th><th scope="col" class="num">Amount</th><th scope="col" class="num">${list.some((b) => b.properties.currentSpend) ? 'Spent this month' : 'Left this month'}</th>
          <th scope="col">Thresholds crossed</th><th scope="col">Exceeded</th><th scope="col">At the limit</th>${!this.app.refusal('budgets/write') ? html`<th scope="col">Change</th>` : nothing}</tr></thead>
        <tbody>${list.map((b) => {
          const p = b.properties;
          const spend = p.currentSpend;  // only admins are answered a budget's spend and status (docs/RBAC.md)
          const pct = spend && Number(p.amount) ? Math.round((Number(spend.amount) / Number(p.amount)) * 100) : 0;
          const crossed = (p.status && p.status.thresholdsCrossed) || [];
          const hidden = html`<span class="muted">not shown to your role</span>`;
          // a caller not shown the spend is shown where the budget stands: the share left, and whether it is exceeded
          const standing = p.standing;
          const exceeded = p.status ? Boolean(p.status.exceeded) : standing ? Boolean(standing.exceeded) : null;
          return html`<tr data-budget=${b.name}>
            <th scope="row">${b.name}</th><td>${covers(p.filter)}</td>
            <td class="money num budget-amount">${p.amount} ${p.currency}</td>
            <td class="money num budget-spend">${spend ? html`${spend.amount} ${spend.unit} <span class="muted small">(${pct} %, as of ${time(p.status && p.status.evaluatedAt, true)})</span>` : standing ? html`<span class="budget-left">${standing.remainingPercent} % left</span> <span class="muted small">(as of ${time(standing.evaluatedAt, true)})</span>` : hidden}</td>
            <td>${!p.status ? hidden : crossed.length ? crossed.map((t) => `${t} %`).join(', ') : html`<span class="muted">none</span>`}</td>
            <td class="budget-exceeded">${exceeded === null ? hidden : exceeded ? html`<span class="badge badge-bad">Exceeded</span>` : 'No'}</td>
            <td>${p.actionAtLimit || 'None'}</td>
            ${!this.app.refusal('budgets/write') ? html`<td class="row-actions"><button class="secondary" @click=${() => (this.budgetForm = b)}>Edit</button>
              ${confirmed(this, `budget:${b.name}`, { label: 'Remove…', group: `Confirm removing ${b.name}`, question: `Remove ${b.name}?`, confirmLabel: 'Remove budget', act: () => this.removeBudget(b.name) })}</td>` : nothing}</tr>`;
        })}</tbody></table></div>
        <p class="muted small">Spend is this calendar month's (UTC) in each budget's currency, as of each budget's last evaluation (every 5 minutes, and at once when it changes); only admins are shown it, and everyone else the share of each budget left — how near it is to its action at the limit, which may refuse or stop your work.</p>` : nothing}
    </section>`;
  }

  /** The budget form, empty for a new budget or filled from `b` to change it (its name then fixed). */
  renderBudgetForm(b) {
    const p = b.properties || {};
    const month = (iso) => (iso ? String(iso).slice(0, 7) : '');
    const now = new Date();
    const thisMonth = `${now.getUTCFullYear()}-${String(now.getUTCMonth() + 1).padStart(2, '0')}`;
    const notice = Object.values(p.notifications || {})[0] || {};
    const groups = p.filter && p.filter.dimensions ? p.filter.dimensions.values.join(', ') : '';
    return html`<form class="card form" @submit=${(e) => this.saveBudget(e)} aria-label=${b.name ? `Change budget ${b.name}` : 'Set a budget'}>
      <div class="grid">
        ${field('Name', 'budget-name', html`<input id="budget-name" name="name" required pattern=${NAME_PATTERN} maxlength="63" .value=${b.name || ''} ?readonly=${Boolean(b.name)} aria-describedby="budget-name-help" />`, NAME_HELP)}
        ${field('Amount per month', 'budget-amount', html`<input id="budget-amount" name="amount" type="number" required min="0.000001" step="any" .value=${p.amount || ''} />`)}
        ${field('Currency', 'budget-currency', html`<input id="budget-currency" name="currency" required pattern="[A-Z]{3}" maxlength="3" .value=${p.currency || 'USD'} />`, 'ISO 4217, e.g. USD')}
        ${field('Resource groups (optional)', 'budget-groups', html`<input id="budget-groups" name="groups" maxlength="1024" .value=${groups} />`, 'comma-separated; empty: the whole subscription')}
        ${field('From (month, UTC)', 'budget-start', html`<input id="budget-start" name="start" type="month" required .value=${month(p.timePeriod && p.timePeriod.startDate) || thisMonth} />`)}
        ${field('Until (month, optional)', 'budget-end', html`<input id="budget-end" name="end" type="month" .value=${month(p.timePeriod && p.timePeriod.endDate)} />`, 'the first month it no longer applies')}
        ${field('Notify at (% of the amount)', 'budget-threshold', html`<input id="budget-threshold" name="threshold" type="number" min="0.0001" max="1000" step="any" .value=${String(notice.threshold ?? 80)} />`)}
        ${field('Contact e-mails', 'budget-emails', html`<input id="budget-emails" name="emails" maxlength="2048" .value=${(notice.contactEmails || []).join(', ')} />`, 'comma-separated')}
        ${field('At the limit', 'budget-action', html`<select id="budget-action" name="action">
          ${[['None', 'Notify only'], ['RefuseNewAllocations', 'Refuse new work'], ['StopAll', 'Stop all its work']].map(([k, label]) => html`<option value=${k} ?selected=${(p.actionAtLimit || 'None') === k}>${label}</option>`)}</select>`)}
      </div>
      ${Object.keys(p.notifications || {}).length > 1 || (p.filter && p.filter.tags)
        ? html`<p class="small muted">Kept as they are: ${Object.keys(p.notifications || {}).length > 1 ? `${Object.keys(p.notifications).length - 1} more notification(s)` : ''}${p.filter && p.filter.tags ? ` the filter on tag ${p.filter.tags.name}` : ''} (change them through the API).</p>`
        : nothing}
      <button type="submit" ?disabled=${this.budgetSaveLoading}>${this.budgetSaveLoading ? 'Saving…' : 'Save budget'}</button>
      <button type="button" class="secondary" @click=${() => (this.budgetForm = null)}>Close</button>
    </form>`;
  }

  renderQuotaForm(q) {
    const names = (this.usages || []).map((u) => u.name.value);
    return html`<form class="card form inline" @submit=${(e) => this.saveQuota(e)} aria-label="Set a quota">
      ${field('Quota', 'quota-name', html`<input id="quota-name" name="name" required list="quota-names" maxlength="80" pattern="[a-z][a-z0-9]{1,15}s(-[a-z0-9][a-z0-9._\-]{0,63})?" .value=${q.name || ''} />`, 'gpus, tpus, gpus-h100… ({kind}s or {kind}s-{model})')}
      <datalist id="quota-names">${names.map((n) => html`<option value=${n}></option>`)}</datalist>
      ${field('Limit (devices at once)', 'quota-limit', html`<input id="quota-limit" name="limit" type="number" required min="0" step="1" .value=${String(q.limit ?? '')} />`)}
      <button type="submit" ?disabled=${this.quotaSaveLoading}>Set quota</button>
      <button type="button" class="secondary" @click=${() => (this.quotaForm = null)}>Close</button>
    </form>`;
  }

  renderUsages() {
    return html`<section class="card" aria-label="Accelerator quotas">
      <h2>Accelerator quotas of subscription ${this.ctx.sub} in ${this.location}</h2>
      <form class="form inline" @submit=${(e) => this.showUsages(e)} aria-label="Choose location">
        ${field('Location', 'quota-location', html`<input id="quota-location" name="location" required pattern="[A-Za-z0-9][A-Za-z0-9 _\\-]*" maxlength="64" .value=${this.location} />`)}
        <button type="submit" class="secondary">Show quotas</button>
      </form>
      <div class="toolbar">${offered(this.app, 'quotas/write', 'Set a quota', html`<button @click=${() => (this.quotaForm = this.quotaForm ? null : {})} aria-expanded=${Boolean(this.quotaForm)}>Set a quota</button>`)}</div>
      ${this.quotaForm ? this.renderQuotaForm(this.quotaForm) : nothing}
      ${error(this.quotaSaveError)}
      ${loading(this.usagesLoading, 'Loading quota usage')} ${error(this.usagesError)}
      ${this.usages ? html`<div class="table-wrap" tabindex="0"><table class="list" aria-label="Accelerator quota usage">
        <thead><tr><th scope="col">Quota</th><th scope="col" class="num">Devices held</th><th scope="col" class="num">Limit</th>${!this.app.refusal('quotas/write') ? html`<th scope="col">Change</th>` : nothing}</tr></thead>
        <tbody>${this.usages.map((u) => html`<tr data-quota=${u.name.value}>
          <th scope="row">${u.name.localizedValue || u.name.value} <span class="muted small"><code>${u.name.value}</code></span></th>
          <td class="num quota-current">${u.currentValue}</td>
          <td class="num quota-limit">${u.limit < 0 ? html`<span class="muted">none set</span>` : u.limit}</td>
          ${!this.app.refusal('quotas/write') ? html`<td class="row-actions"><button class="secondary" @click=${() => (this.quotaForm = { name: u.name.value, limit: u.limit < 0 ? '' : u.limit })}>Set limit</button>
            ${u.limit < 0 ? nothing : confirmed(this, `quota:${u.name.value}`, { label: 'Remove…', group: `Confirm removing ${u.name.value}`, question: `Remove the ${u.name.value} limit?`, confirmLabel: 'Remove quota', act: () => this.removeQuota(u.name.value) })}</td>` : nothing}</tr>`)}</tbody>
      </table></div>` : nothing}
    </section>`;
  }
}
customElements.define('itl-costs', Costs);

/** The answer's columns and rows as a CSV file (Papa Parse writes it, RFC 4180 quoting), downloaded as
 *  `costs-{from}-{to}.csv`: money as the API's decimal numbers, with the Currency column beside them. */
function downloadCsv(columns, rows, body) {
  // escapeFormulae: a value a consumer chose (a tag, a name) that starts with = + - @ is not run as a formula by a
  // spreadsheet (CSV injection)
  const data = rows.map((r) => r.map((v, i) => (columns[i].type === 'Number' && typeof v === 'number' ? decimal(v) : v)));
  const text = Papa.unparse({ fields: columns.map((c) => c.name), data }, { escapeFormulae: true });
  const period = body.timePeriod ? `${body.timePeriod.from.slice(0, 13)}-${body.timePeriod.to.slice(0, 13)}` : body.timeframe;
  saveFile(text, `costs-${period.replace(/[^0-9A-Za-z-]/g, '')}.csv`);
}
