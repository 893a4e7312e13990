// Jobs: submission (the form checks what the API checks; the API still decides), the list with status and the
// reason a job waits, "my jobs", and a job's detail: timeline Pending → Scheduled → Running → end, cost, cancel.
import { html, nothing } from 'lit';
import { paths, parseId } from '../api.js';
import { View, KINDS, loading, error, offered, confirmed, copyButton, kindOf, devices, pricePerHour, statusBadge, acceleratorText, more, field, formValues, link, NAME_PATTERN, NAME_HELP, RG_PATTERN } from '../ui.js';
import { time, clock, costs } from '../format.js';
import { statsPoints, statsCurrencies } from '../chart.js';
import '../chart.js';
import './joblog.js';

const FINAL = ['Succeeded', 'Failed', 'Canceled', 'Preempted'];
// The API's own bounds (docs/API_REFERENCE.md, sparkJobs properties)
const IMAGE_PATTERN = '[a-z0-9][a-z0-9._\\-]*(:[0-9]{1,5})?(/[a-z0-9._\\-]+)*(:[A-Za-z0-9_][A-Za-z0-9_.\\-]{0,127})?(@sha256:[a-f0-9]{64})?';
const GPU_MODEL_PATTERN = '[A-Za-z0-9][A-Za-z0-9 ._\\-]*';
/** The vendor a job that names no model gets, by kind (domain/accelerators.py DEFAULT_VENDORS). */
const DEFAULT_VENDORS = { GPU: 'NVIDIA', TPU: 'Google', Neuron: 'AWS', HPU: 'Intel' };

const ENV_LINE = /^[A-Za-z_][A-Za-z0-9_]{0,127}=/;

/** The orders the list offers. The API lists jobs by name and cannot sort them: the portal sorts what it read. */
const SORTS = [
  ['newest', 'Newest first'],
  ['oldest', 'Oldest first'],
  ['name', 'Name (A–Z)'],
];
/** Jobs read at once (the API's largest page), so the order is the order of all of them up to that many. */
const READ_MAX = 1000;
/** Rows shown at first, and added by "Show more". */
const ROWS = 50;

function sortJobs(jobs, order) {
  const byName = (a, b) => a.name.localeCompare(b.name);
  const at = (j) => Date.parse(j.properties.submittedAt) || 0;
  const compare = { newest: (a, b) => at(b) - at(a) || byName(a, b), oldest: (a, b) => at(a) - at(b) || byName(a, b), name: byName }[order];
  return [...jobs].sort(compare);
}

class Jobs extends View {
  static properties = { mine: { type: Boolean }, jobs: { state: true }, nextLink: { state: true }, showSubmit: { state: true }, submitted: { state: true }, offers: { state: true }, order: { state: true }, rows: { state: true } };

  constructor() {
    super();
    this.jobs = [];
    this.nextLink = null;
    this.showSubmit = false;
    this.order = SORTS.some(([k]) => k === sessionStorage.getItem('itl-jobs-order')) ? sessionStorage.getItem('itl-jobs-order') : 'newest';
    this.rows = ROWS;
  }

  connectedCallback() {
    super.connectedCallback();
    // every listed job stays current (its status, reason and cost so far): read again every 3 s while one is active,
    // every 15 s when all have ended (a new one appears then)
    this.load().then(() => this.every('live', () => (this.jobs.some((j) => !FINAL.includes(j.properties.status)) ? 3000 : 15000), () => this.read(), 'list'));
  }

  load() {
    return this.track('list', () => this.read());
  }

  /** The jobs read again in one request of up to the API's 1000 (all of them, unless there are more): the list is
   *  sorted in the browser, so it sorts all it read. Past 1000 ("Load more" read the next pages) it is not read
   *  again. */
  async read() {
    if (this.moreLoading || this.jobs.length > READ_MAX) return; // "Load more" under way, or past what one request reads
    const generation = (this.generation = (this.generation || 0) + 1);
    const query = { $top: READ_MAX, submitted_by: this.mine ? this.app.auth.identity.subject : undefined };
    const page = await this.api.page(paths.jobs(this.ctx.sub, this.ctx.rg), query);
    if (generation !== this.generation || this.moreLoading) return; // a newer read, or a "Load more", answered since
    this.jobs = page.value;
    this.nextLink = page.nextLink;
    page.value.forEach((j) => this.app.noteGroup(parseId(j.id).rg));
  }

  loadMore() {
    this.generation = (this.generation || 0) + 1; // a read still under way is older than what this appends to
    return this.track('more', async () => {
      const page = await this.api.page(this.nextLink);
      this.jobs = [...this.jobs, ...page.value];
      this.nextLink = page.nextLink;
    });
  }

  setOrder(order) {
    this.order = order;
    this.rows = ROWS;
    sessionStorage.setItem('itl-jobs-order', order);
  }

  /** Open or close the form; opening reads the nodes in view for the price estimate (their current prices). */
  toggleSubmit() {
    this.showSubmit = !this.showSubmit;
    this.draft = { kind: 'GPU', count: 1, minutes: 10080 };
    if (this.showSubmit) this.track('prices', async () => (this.priceNodes = (await this.api.page(paths.nodes(this.ctx.sub, this.ctx.rg), { $top: 1000 })).value));
  }

  /** What the form asks so far, for the estimate; a location (once changed) reads what is offered there. */
  noteDraft(e) {
    const form = e.currentTarget;
    this.draft = { kind: form.elements.kind.value, count: Number(form.elements.gpus.value) || 0, minutes: Number(form.elements.maxDuration.value) || 0, model: form.elements.gpuModel.value.trim() };
    if (e.type === 'change') this.loadOffers(form.elements.location, form.elements.rg.value.trim());
    this.requestUpdate();
  }

  /** The capacity offers of the form's location for work in its resource group (`GET .../locations/{location}/offers`):
   *  what a job submitted now gets. Read when the location or group changes, never while typing. */
  loadOffers(input, rg) {
    const location = input.value.trim();
    const asked = `${location}|${rg}`;
    if (!location || !input.validity.valid || asked === this.offersFor) return;
    this.offersFor = asked;
    this.track('offers', async () => {
      this.offers = null;
      this.offers = { location, value: (await this.api.get(paths.offers(this.ctx.sub, location), rg ? { resourceGroup: rg } : {})).value };
    });
  }

  /** What is offered in the location: per kind and model the largest request placed at once now, what quotas and
   *  budgets allow, and the prices per device-hour (the API's figures, read when the location was chosen). */
  renderOffers() {
    if (!this.offers) return nothing;
    const { location, value } = this.offers;
    if (!value.length) return html`<p class="small muted offers" role="status">Nothing is offered to you in ${location}: no node there in your resource groups.</p>`;
    return html`<div class="small offers" role="status"><p>Offered now in ${location} (a job asking at most this is placed at once):</p><ul>
      ${value.map((o) => {
        const p = o.properties;
        const what = `${p.accelerator.kind}${p.accelerator.model ? ` ${p.accelerator.model}` : ''}`;
        const prices = p.pricePerAcceleratorHour.map((r) => `${r.min === r.max ? r.min : `${r.min}–${r.max}`} ${r.currency}`).join(', ');
        const limit = p.budget.refusal ? html` — <span class="muted">${p.budget.refusal}</span>` : p.allowedNow < p.largestSingleNode.devices ? html` — ${p.allowedNow} allowed by ${p.quota ? `quota ${p.quota.name}` : 'the budget'}` : nothing;
        // the parts of the line, each said once, joined by commas (a part that does not apply is left out)
        const parts = [p.largestSingleNode.devices || p.largestMultiNode
          ? html`up to <strong>${p.largestSingleNode.devices}</strong> at once on one node (${p.largestSingleNode.memoryGb} GiB free beside them)`
          : html`<strong>none</strong> at once now`];
        if (p.largestMultiNode) parts.push(html`or ${p.largestMultiNode.nodes} nodes × ${p.largestMultiNode.devicesPerNode} at once`);
        parts.push(`${p.availableNodes} of ${p.nodes} nodes taking work`);
        if (prices) parts.push(`${prices} per device-hour`);
        // the same devices for a later window: the booking form of the reservations view, filled in with this offer
        const later = this.app.may('reservations/book')
          ? html` <a class="small book-later" href=${`#/reservations?${new URLSearchParams({ book: '1', kind: p.accelerator.kind, model: p.accelerator.model || '', location })}`}>Book ${what} for a later window</a>`
          : nothing;
        return html`<li class="offer" data-offer=${o.name}>${what}: ${parts.map((part, i) => html`${i ? ', ' : ''}${part}`)}${limit}${excludedText(p.budget)}${later}</li>`;
      })}</ul></div>`;
  }

  /** The price of the asked devices on the nodes in view that could hold them, per currency: nodes' prices now
   *  (a job locks its node's price when it is placed, under its price ceiling); an estimate, not a quote. */
  renderEstimate() {
    if (!this.priceNodes || !this.draft) return nothing;
    const d = this.draft;
    const norm = (m) => String(m || '').toLowerCase().replace(/\s+/g, '');
    // the API's vendor rule (docs/API_REFERENCE.md "Vendors"): naming no model, a job gets its kind's usual vendor's
    // devices (NVIDIA GPUs), so the estimate prices those only
    const vendor = d.model ? null : DEFAULT_VENDORS[d.kind] || null;
    const holding = this.priceNodes.filter((n) => {
      const p = n.properties;
      const model = (p.accelerator && p.accelerator.model) || (p.hardwareSpecs && p.hardwareSpecs.gpuModel);
      const made = (p.accelerator && p.accelerator.vendor) || 'NVIDIA';
      return kindOf(p) === d.kind && devices(p.capacity).total >= d.count && p.pricing && (!d.model || norm(model) === norm(d.model))
        && (!vendor || made.toLowerCase() === vendor.toLowerCase());
    });
    if (!holding.length) return html`<p class="small muted estimate" role="status">No ${d.kind} node here could hold ${d.count} ${d.kind}s${d.model ? ` of model ${d.model}` : ''}: the API would say why when you submit.</p>`;
    // once the offers are read, the currencies the budgets covering the work count (null: any): a node billing in
    // another is not offered, so it is not in the estimate either (the offers line says why)
    const counted = this.offers && this.offers.value.length ? this.offers.value[0].properties.budget.currencies : null;
    const fits = counted ? holding.filter((n) => counted.includes(n.properties.pricing.currency)) : holding;
    const left = [...new Set(holding.filter((n) => !fits.includes(n)).map((n) => n.properties.pricing.currency))].sort();
    const leftNote = left.length ? html` <span class="muted estimate-left">(nodes billing in ${left.join(' and ')} left out: ${counted.length ? `your budget counts ${counted.join(' and ')} only` : 'your budgets count no currency in common'})</span>` : nothing;
    if (!fits.length) return html`<p class="small muted estimate" role="status">No ${d.kind} node here that could hold ${d.count} ${d.kind}s is offered to you${leftNote}.</p>`;
    const byCurrency = new Map();
    for (const n of fits) {
      const price = Number(pricePerHour(n.properties.pricing));
      const c = n.properties.pricing.currency;
      const [lo, hi] = byCurrency.get(c) || [Infinity, -Infinity];
      byCurrency.set(c, [Math.min(lo, price), Math.max(hi, price)]);
    }
    const amount = (x) => x.toLocaleString(undefined, { maximumFractionDigits: 6 });
    const range = (lo, hi, c) => (lo === hi ? `${amount(lo)} ${c}` : `${amount(lo)}–${amount(hi)} ${c}`);
    return html`<p class="small estimate" role="status">Estimate on ${fits.length} ${d.kind} node${fits.length === 1 ? '' : 's'} here:
      ${[...byCurrency].map(([c, [lo, hi]], i) => html`${i ? '; ' : ''}${range(lo, hi, c)} per ${d.kind}-hour, so about <strong>${range(lo * d.count, hi * d.count, c)} an hour</strong> for ${d.count}, at most ${range((lo * d.count * d.minutes) / 60, (hi * d.count * d.minutes) / 60, c)} over ${d.minutes} minutes`)}
      <span class="muted">(prices now: a job is billed at its node's price when it is placed, within its price ceiling)</span>${leftNote}</p>`;
  }

  checkEnv(e) {
    const bad = e.target.value.split('\n').map((l) => l.trim()).filter((l) => l && !ENV_LINE.test(l));
    e.target.setCustomValidity(bad.length ? `Not NAME=value: ${bad[0]}` : '');
  }

  async submit(e) {
    e.preventDefault();
    const v = formValues(e.target);
    // what it asks for: devices of one kind (any model, or the one named), with GiB of device memory in all
    const accelerator = { kind: v.kind, count: Number(v.gpus), memoryGb: Number(v.memoryGb) };
    if (v.gpuModel) accelerator.model = v.gpuModel;
    const properties = {
      jobType: v.jobType,
      accelerator,
      priority: Number(v.priority),
      maxDurationMinutes: Number(v.maxDuration),
    };
    if (v.image) {
      properties.workload = {
        image: v.image,
        command: (v.command || '').split('\n').map((l) => l.trim()).filter(Boolean),
        env: pairs(v.env),
        secretEnv: pairs(v.secretEnv),
      };
    }
    const body = { name: v.name, properties, ...(v.location ? { location: v.location } : {}) };
    const r = await this.track('submit', () => this.api.request('POST', paths.jobs(this.ctx.sub, v.rg), { body }));
    if (r) {
      this.submitted = { rg: v.rg, name: v.name };
      this.showSubmit = false;
      this.app.noteGroup(v.rg);
      this.load();
    }
  }

  render() {
    const me = this.app.auth.identity.subject;
    return html`<h1>Jobs</h1>
      <div class="toolbar">
        ${offered(this.app, 'jobs/submit', 'Submit a job', html`<button @click=${() => this.toggleSubmit()} aria-expanded=${this.showSubmit}>Submit a job</button>`)}
        <a class="button secondary" href=${this.mine ? '#/jobs' : '#/jobs?mine=1'}>${this.mine ? 'Show all jobs I may see' : 'My jobs only'}</a>
        <button class="secondary" @click=${() => this.load()}>Refresh</button>
      </div>
      ${this.showSubmit ? this.renderSubmit() : nothing}
      ${this.submitted ? html`<p class="ok" role="status">Job <a href=${link('jobs', this.submitted.rg, this.submitted.name)}>${this.submitted.name}</a> submitted.</p>` : nothing}
      <p class="muted">${this.mine ? html`Jobs submitted by <strong>${me}</strong>` : 'Jobs the API lets you see'} in ${this.ctx.rg ? `resource group ${this.ctx.rg}` : `subscription ${this.ctx.sub}`}.</p>
      ${loading(this.listLoading && !this.jobs.length, 'Loading jobs')} ${error(this.listError)}
      ${!this.listLoading && !this.listError && !this.jobs.length ? html`<p class="empty">No jobs.</p>` : nothing}
      ${this.jobs.length ? this.renderList() : nothing}`;
  }

  /** The jobs read, in the order chosen, ROWS at a time; what the order is over (the API lists by name: the portal
   *  sorts the jobs it read, all of them unless there are more than one request reads). */
  renderList() {
    const sorted = sortJobs(this.jobs, this.order);
    const shown = sorted.slice(0, this.rows);
    const label = SORTS.find(([k]) => k === this.order)[1].toLowerCase();
    const over = this.nextLink
      ? `sorted by the portal among the first ${this.jobs.length} by name that it read (the API lists jobs by name and cannot sort them): load more to sort the next ones in`
      : `sorted by the portal: all ${this.jobs.length} read`;
    return html`<div class="toolbar">
        ${field('Sort', 'jobs-sort', html`<select id="jobs-sort" @change=${(e) => this.setOrder(e.target.value)}>${SORTS.map(([k, l]) => html`<option value=${k} ?selected=${k === this.order}>${l}</option>`)}</select>`)}
      </div>
      <p class="muted small jobs-order">Showing ${shown.length} of ${this.jobs.length}${this.nextLink ? '+' : ''} jobs, ${label}; ${over}.</p>
      <div class="table-wrap"><table class="list" aria-label="Jobs">
        <thead><tr><th scope="col">Name</th><th scope="col">Status</th><th scope="col">Reason</th><th scope="col">Accelerators</th><th scope="col">Submitted by</th><th scope="col">Submitted</th><th scope="col">Cost</th></tr></thead>
        <tbody>${shown.map((j) => {
          const id = parseId(j.id);
          const p = j.properties;
          return html`<tr data-job=${j.name}><td><a href=${link('jobs', id.rg, j.name)}>${j.name}</a></td><td>${statusBadge(p.status)}</td>
            <td class="reason">${p.statusReason || ''}${p.status === 'Pending' && p.estimatedStartTime ? html` <span class="small muted">· expected ${time(p.estimatedStartTime, true)}</span>` : nothing}</td><td>${acceleratorText(p)}</td><td>${p.submittedBy}</td><td>${time(p.submittedAt, true)}</td>
            <td class="job-list-cost">${p.cost ? html`${costs([p.cost])}${p.costAsOf ? html` <span class="small muted">so far</span>` : nothing}` : '—'}</td></tr>`;
        })}</tbody></table></div>
      ${sorted.length > shown.length ? html`<button class="secondary" @click=${() => (this.rows += ROWS)}>Show ${Math.min(ROWS, sorted.length - shown.length)} more</button>` : nothing}
      ${sorted.length > shown.length ? nothing : html`${more(this.nextLink, () => this.loadMore(), this.moreLoading)} ${error(this.moreError)}`}`;
  }

  renderSubmit() {
    return html`<form class="card form" @submit=${(e) => this.submit(e)} @input=${(e) => this.noteDraft(e)} @change=${(e) => this.noteDraft(e)} aria-label="Submit a job">
      <h2>Submit a job</h2>
      <div class="grid">
        ${field('Name', 'job-name', html`<input id="job-name" name="name" required pattern=${NAME_PATTERN} maxlength="63" aria-describedby="job-name-help" />`, NAME_HELP)}
        ${field('Resource group', 'job-rg', html`<input id="job-rg" name="rg" required pattern=${RG_PATTERN} maxlength="90" .value=${this.app.defaultGroup} />`)}
        ${field('Job type', 'job-type', html`<select id="job-type" name="jobType"><option value="training">training</option><option value="fineTuning">fineTuning</option><option value="batchInference">batchInference</option></select>`)}
        ${field('Accelerator kind', 'job-kind', html`<select id="job-kind" name="kind">${KINDS.map((k) => html`<option value=${k}>${k}</option>`)}</select>`)}
        ${field('Devices', 'job-gpus', html`<input id="job-gpus" name="gpus" type="number" required min="1" max="64" step="1" value="1" />`, '1–64')}
        ${field('Device memory (GiB)', 'job-mem', html`<input id="job-mem" name="memoryGb" type="number" required min="0" max="65536" step="1" value="80" />`, '0–65536 in all; 0: the devices’ own')}
        ${field('Priority', 'job-priority', html`<input id="job-priority" name="priority" type="number" required min="0" max="9" step="1" value="5" />`, '0–9, higher first')}
        ${field('Max duration (minutes)', 'job-duration', html`<input id="job-duration" name="maxDuration" type="number" required min="1" max="43200" step="1" value="10080" />`, '1–43200')}
        ${field('Model (optional)', 'job-gpu-model', html`<input id="job-gpu-model" name="gpuModel" pattern=${GPU_MODEL_PATTERN} maxlength="58" />`)}
        ${field('Location (optional)', 'job-location', html`<input id="job-location" name="location" pattern="[A-Za-z0-9][A-Za-z0-9 _\\-]*" maxlength="64" />`)}
        ${field('Container image (optional)', 'job-image', html`<input id="job-image" name="image" pattern=${IMAGE_PATTERN} maxlength="256" aria-describedby="job-image-help" />`, 'OCI reference; empty: the job type\u2019s default workload')}
        ${field('Command, one argument per line', 'job-command', html`<textarea id="job-command" name="command" rows="3"></textarea>`)}
        ${field('Environment, NAME=value per line', 'job-env', html`<textarea id="job-env" name="env" rows="3" @input=${(e) => this.checkEnv(e)}></textarea>`)}
        ${field('Secret variables, NAME=value per line', 'job-secret-env', html`<textarea id="job-secret-env" name="secretEnv" rows="2" autocomplete="off" spellcheck="false" aria-describedby="job-secret-env-help" @input=${(e) => this.checkEnv(e)}></textarea>`, 'write-only: shown as ****** to everyone afterwards, the submitter too')}
      </div>
      ${this.renderEstimate()} ${error(this.pricesError)}
      ${loading(this.offersLoading, 'Reading what is offered')} ${this.renderOffers()} ${error(this.offersError)}
      <button type="submit" ?disabled=${this.submitLoading}>${this.submitLoading ? 'Submitting…' : 'Submit'}</button>
      ${error(this.submitError)}
    </form>`;
  }
}
customElements.define('itl-jobs', Jobs);

class JobDetail extends View {
  static properties = { rg: {}, name: {}, job: { state: true }, stats: { state: true }, message: { state: true }, deleted: { state: true } };

  constructor() {
    super();
    this.job = null;
    this.stats = null;
  }

  get path() {
    return paths.job(this.ctx.sub, this.rg, this.name);
  }

  connectedCallback() {
    super.connectedCallback();
    this.load();
  }

  disconnectedCallback() {
    super.disconnectedCallback();
    clearTimeout(this.timer);
    this.gone = true;
  }

  async load() {
    await this.track('job', async () => this.read());
    if (!this.job) return;
    this.loadStats();
    this.follow();
    // the hourly roll-up catches up with the job's cost within minutes: read it again while the page is open
    this.every('stats', 30000, async () => {
      this.stats = await this.api.get(`${this.path}/stats`, { hours: 24 });
      this.statsAt = new Date().toISOString();
    });
  }

  async read() {
    this.take(await this.api.get(this.path));
  }

  /** Show the job as read; a note of what was asked of it ("Cancellation requested.") goes once it has ended: its
   *  status and reason say how it did. */
  take(job) {
    this.job = job;
    if (FINAL.includes(job.properties.status)) this.message = null;
  }

  follow() {
    clearTimeout(this.timer);
    if (this.gone || !this.job || FINAL.includes(this.job.properties.status)) return;
    this.timer = setTimeout(async () => {
      try {
        await this.read();
        if (FINAL.includes(this.job.properties.status)) this.loadStats();
      } catch (err) {
        this.jobError = err;
      }
      this.follow();
    }, 2000);
  }

  loadStats() {
    return this.track('stats', async () => {
      this.stats = await this.api.get(`${this.path}/stats`, { hours: 24 });
      this.statsAt = new Date().toISOString();
    });
  }

  async cancel() {
    const r = await this.track('action', () => this.api.request('POST', `${this.path}/cancel`));
    if (r) {
      this.message = 'Cancellation requested.';
      this.take(await this.api.get(this.path).catch(() => this.job));
      this.follow();
    }
  }

  async remove() {
    const r = await this.track('action', () => this.api.request('DELETE', this.path));
    if (r) this.deleted = true;
  }

  /** The job's one cost, as the API answers it: while it runs its cost so far (`costAsOf`: the read it is as of),
   *  at the price it locked; once it ended its final cost. */
  renderCost(p, final) {
    if (p.cost && running(p)) {
      return html`<span class="job-cost">${costs([p.cost])}</span> <span class="small">(as of ${clock(p.costAsOf)}${p.billingTerms ? `, at ${termsText(p.billingTerms, kindOf(p))}` : ''})</span>`;
    }
    if (p.cost && final) return html`<span class="job-cost">${costs([p.cost])}</span> <span class="small muted">(final${p.billingTerms ? `, at ${termsText(p.billingTerms, kindOf(p))}` : ''})</span>`;
    if (p.cost) return html`<span class="job-cost">${costs([p.cost])}</span> <span class="small muted">(its earlier attempts; nothing is billed while it waits)</span>`;
    if (final) return html`<span class="job-cost">—</span> <span class="small muted">(it never ran: nothing is billed)</span>`;
    return html`<span class="job-cost">—</span> <span class="small muted">(nothing yet: billing starts when it runs)</span>`;
  }

  /** Admins, and the consumer who submitted it (RBAC: sparkJobs/cancel/action and /delete, a consumer its own). */
  mayChange(p) {
    const roles = this.app.auth.identity.roles;
    return roles.includes('itl-accelerator-admin') || (this.app.may('jobs/cancel') && p.submittedBy === this.app.auth.identity.subject);
  }

  render() {
    return html`<p><a href="#/jobs">← Jobs</a></p><h1>Job ${this.name}</h1>
      ${loading(this.jobLoading, 'Loading the job')} ${error(this.jobError)}
      ${this.deleted ? html`<p class="ok" role="status">Job ${this.name} deleted.</p>` : this.job ? this.renderJob(this.job) : nothing}`;
  }

  renderJob(j) {
    const p = j.properties;
    const final = FINAL.includes(p.status);
    return html`<div class="cards">
      <section class="card" aria-label="Status">
        <p class="job-status">Status: ${statusBadge(p.status)} ${final ? nothing : html`<span class="spinner" role="img" aria-label="in progress"></span>`}</p>
        ${p.statusReason ? html`<p class="reason">${p.statusReason}</p>` : nothing}
        ${startEstimate(p)}
        ${timeline(p)}
        <div class="toolbar">
          ${this.mayChange(p)
            ? final
              ? confirmed(this, 'delete', { label: 'Delete…', group: 'Confirm deletion', question: `Delete ${this.name}? Its charges stay billed.`, confirmLabel: 'Delete job', act: () => this.remove() })
              : confirmed(this, 'cancel', { label: 'Cancel job…', group: 'Confirm cancellation', question: `Cancel ${this.name}? It stops and is billed up to now.`, confirmLabel: 'Cancel job', act: () => this.cancel() })
            : html`<span class="muted small not-offered">Cancelling and deleting a job are for its submitter (${p.submittedBy}) and admins.</span>`}
          <a href=${`#/usage?resource=${encodeURIComponent(j.id)}`}>Usage and cost</a>
          ${this.app.activityRefusal() ? nothing : html`<a href=${`#/activity?resource=${encodeURIComponent(j.id)}`}>Activity</a>`}
        </div>
        ${loading(this.actionLoading, 'Working')} ${error(this.actionError)}
        ${this.message && !final ? html`<p class="ok" role="status">${this.message}</p>` : nothing}
      </section>
      <section class="card" aria-label="Details">
        <dl class="props">
          <dt>Id</dt><dd><code class="resource-id">${j.id}</code> ${copyButton(j.id, 'Id')}</dd>
          <dt>Type</dt><dd>${p.jobType}</dd>
          <dt>Requested</dt><dd>${acceleratorText(p)}, ${(p.accelerator && p.accelerator.memoryGb) ?? p.requestedMemoryGb} GiB of device memory${p.accelerator && p.accelerator.nodes ? ` on each of ${p.accelerator.nodes} nodes` : ''}</dd>
          <dt>Priority</dt><dd>${p.priority}${p.preemptible ? ` · preemptible (${p.preemptMode === 'Requeue' ? 'requeued' : 'ends'} when preempted)` : ''}</dd>
          ${p.preemptedBy ? html`<dt>Preempted by</dt><dd>${(() => { const b = parseId(p.preemptedBy); return html`<code>${b.rg}/${b.name}</code>`; })()} at ${time(p.preemptedAt)}</dd>` : nothing}
          ${p.retryStrategy ? html`<dt>Retries</dt><dd>up to ${p.retryStrategy.attempts} runs; attempt ${p.attempt ?? 1} now</dd>` : nothing}
          <dt>${(p.assignedNodes || []).length > 1 ? 'Nodes' : 'Node'}</dt><dd>${(p.assignedNodes || (p.assignedNode ? [p.assignedNode] : [])).map((id, i) => { const n = parseId(id); return html`${i ? ', ' : ''}<a href=${link('nodes', n.rg, n.name)}>${n.name}</a>`; })}${p.assignedNode ? nothing : '—'}</dd>
          <dt>Image</dt><dd><code>${p.workload ? p.workload.image : '—'}</code></dd>
          ${p.workload && Object.keys({ ...p.workload.env, ...p.workload.secretEnv }).length
            ? html`<dt>Environment</dt><dd class="job-env">${Object.entries({ ...p.workload.env, ...p.workload.secretEnv }).map(([k, v]) => html`<code>${k}=${v}</code> `)}</dd>`
            : nothing}
          <dt>Submitted by</dt><dd>${p.submittedBy}</dd>
          <dt>Device-seconds${running(p) ? ' so far' : ''}</dt><dd>${p.gpuSeconds ?? '—'} (billable ${p.billableGpuSeconds ?? '—'})</dd>
          <dt>${running(p) ? 'Cost so far' : 'Cost'}</dt><dd class="job-cost-line">${this.renderCost(p, final)}</dd>
        </dl>
      </section></div>
      ${(p.attempts || []).length ? html`<section class="card" aria-label="Attempts">
        <h2>Attempts</h2>
        <table class="attempts"><thead><tr><th scope="col">#</th><th scope="col">Status</th><th scope="col">Why</th><th scope="col">Node</th><th scope="col">Ran</th><th scope="col">Cost</th></tr></thead>
          <tbody>${p.attempts.map((a) => html`<tr><td>${a.attempt}</td><td>${statusBadge(a.status)}</td><td class="reason">${attemptReason(a)}</td>
            <td>${a.assignedNode ? parseId(a.assignedNode).name : '—'}</td><td>${time(a.startedAt)} – ${time(a.endedAt)}</td><td>${a.cost ? costs([a.cost]) : '—'}</td></tr>`)}</tbody></table>
      </section>` : nothing}
      <itl-job-log .path=${this.path}></itl-job-log>
      <section class="card" aria-label="Usage over time">
        <h2>Usage per hour, last 24 hours</h2>
        ${loading(this.statsLoading, 'Loading usage')} ${error(this.statsError)}
        ${this.stats ? html`<itl-chart bars .title=${'Cost per hour'} .points=${statsPoints(this.stats)} .series=${statsCurrencies(this.stats).map((c) => ({ key: `cost_${c}`, label: 'Cost', unit: c }))}
            .note=${html`<span class="small muted">— the hourly roll-up, read ${clock(this.statsAt)}: it trails the job's cost above by up to 15 minutes${final ? '' : ' while the job runs'}</span>`}
            .empty=${'Nothing rolled up yet: the hourly roll-up runs every 15 minutes.'}></itl-chart>` : nothing}
      </section>`;
  }
}
customElements.define('itl-job-detail', JobDetail);

/** Why an offer leaves out nodes of some currencies (`budget.excludedCurrencies`): the budgets covering the work
 *  count only their own currency (all of theirs: one in common), so a node billing in another is not offered. */
function excludedText(budget) {
  const excluded = (budget && budget.excludedCurrencies) || [];
  if (!excluded.length) return nothing;
  const counted = budget.currencies || [];
  const why = counted.length
    ? `your budget counts ${counted.join(' and ')} only`
    : 'the budgets covering your work are in different currencies, so no node’s charges can be counted by all of them';
  return html`<span class="excluded-currencies"> — nodes billing in ${excluded.join(' and ')} are not offered: ${why}</span>`;
}

/** {NAME: value} of "NAME=value" lines (blank lines skipped; the form checked each line's shape). */
function pairs(text) {
  return Object.fromEntries((text || '').split('\n').map((l) => l.trim()).filter(Boolean).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
}

/** "2.5 USD per GPU-hour (60 s increments)" from a job's locked billing terms and its device kind. */
function termsText(t, kind = 'device') {
  return `${pricePerHour(t)} ${t.currency} per ${kind}-hour${t.billingIncrementSeconds > 1 ? ` (${t.billingIncrementSeconds} s increments)` : ''}`;
}

/** An attempt's reason, with its exit code unless the reason already names it ("The container exited with code 1."). */
function attemptReason(a) {
  const reasonText = a.statusReason || '';
  if (a.exitCode === null || a.exitCode === undefined) return reasonText;
  const named = new RegExp(`\\bcode ${a.exitCode}(?![0-9])`, 'i').test(reasonText);
  return named ? reasonText : `${reasonText}${reasonText ? ' ' : ''}(exit code ${a.exitCode})`;
}

/** While the job waits: when the API expects it to start (`estimatedStartTime`, computed as Slurm's backfill
 * does), or why it cannot say (`estimatedStartReason`), its place in the subscription's queue and the estimate's age. */
function startEstimate(p) {
  if (p.status !== 'Pending' || !p.queuePosition) return nothing;
  const when = p.estimatedStartTime
    ? html`Expected to start <strong>${time(p.estimatedStartTime)}</strong>`
    : html`Start time not known: ${p.estimatedStartReason || 'not estimated yet'}`;
  return html`<p class="start-estimate">${when} · number ${p.queuePosition} in the subscription's queue <span class="small muted">(estimated at ${clock(p.estimatedAt)})</span></p>`;
}

/** Whether the job runs now, its usage and cost being so far (the API says when they are as of: `costAsOf`). */
function running(p) {
  return !FINAL.includes(p.status) && Boolean(p.costAsOf || p.status === 'Running');
}

/** Pending → Scheduled → Running → end, from the job's own times (the API records no time of its placement). */
function timeline(p) {
  const order = ['Pending', 'Scheduled', 'Running'];
  const final = FINAL.includes(p.status);
  const idx = order.indexOf(p.status);
  const entered = final ? [true, Boolean(p.assignedNode || p.startedAt), Boolean(p.startedAt), true] : [0, 1, 2, 3].map((i) => i <= idx);
  const steps = [
    { label: 'Pending', at: p.submittedAt },
    { label: 'Scheduled', at: null, note: p.assignedNode ? `on ${parseId(p.assignedNode).name}` : '' },
    { label: 'Running', at: p.startedAt },
    { label: final ? p.status : 'End', at: p.endedAt },
  ];
  return html`<ol class="timeline" aria-label="Timeline">
    ${steps.map((s, i) => {
      const state = final ? (entered[i] ? 'done' : 'skipped') : i < idx ? 'done' : i === idx ? 'current' : 'todo';
      const when = s.at ? time(s.at) : state === 'skipped' ? 'skipped' : s.note && entered[i] ? s.note : state === 'todo' ? '' : '…';
      return html`<li class="step step-${state}" aria-current=${state === 'current' ? 'step' : 'false'}>
        <span class="step-label">${s.label}</span> <span class="small">${when}</span>
      </li>`;
    })}
  </ol>`;
}
