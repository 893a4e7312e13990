// Capacity reservations (issue 44): devices booked for a future window on whole UTC hours, billed every hour of it.
// The list (name, state, window, nodes, total cost) with a time line — a row per node, a bar per window —, a booking
// form that PUTs and shows the API's answer (its 409 names the window and the nodes that block it), and cancel.
// A node's page shows the reservations on that node with the same time line (reservationTimeline).
import { html, nothing } from 'lit';
import { paths, parseId } from '../api.js';
import { View, KINDS, loading, error, offered, confirmed, field, formValues, link, NAME_PATTERN, NAME_HELP, RG_PATTERN } from '../ui.js';
import { time, costs } from '../format.js';

const HOUR = 3600 * 1000;
/** The API's bounds (models/reservations.py): a window of 1 hour to 28 days, starting at most 56 days ahead. */
const MAX_HOURS = 28 * 24;
const MAX_AHEAD_DAYS = 56;
/** The badge colour of a reservation's state, as the jobs' (ui.js statusBadge): Scheduled waits, Active runs,
 *  Expired is over. */
const STATE_BADGE = { Scheduled: 'wait', Active: 'run', Expired: 'muted' };

/** A reservation's state as a badge. */
export function reservationState(state) {
  return html`<span class="badge badge-${STATE_BADGE[state] || 'wait'} reservation-state">${state}</span>`;
}

/** What a reservation books, in words: `8 × GPU H100`, or `2 nodes × 8 × GPU H100` for a gang's. */
export function bookedText(p) {
  const a = p.accelerator || {};
  const what = `${a.count} × ${a.vendor && a.vendor.toLowerCase() !== 'any' ? `${a.vendor} ` : ''}${a.kind}${a.model ? ` ${a.model}` : ''}`;
  return a.nodes > 1 ? `${a.nodes} nodes × ${what}` : what;
}

/** The nodes that hold a reservation, as links to their pages, each with the devices it keeps there. */
function heldOn(p) {
  return html`${(p.reservedNodes || []).map((n, i) => {
    const id = parseId(n.id);
    return html`${i ? ', ' : ''}<a href=${link('nodes', id.rg, id.name)}>${id.name}</a> <span class="small muted">(${n.devices})</span>`;
  })}`;
}

function utc(ms) {
  return new Date(ms).toISOString().replace('T', ' ').replace(/:00\.000Z$/, ' UTC');
}

/** A time line of `reservations`: a row per node that holds one (only `onlyNode`, an ARM id, when given), a bar per
 *  window, from the earliest start to the latest end (whole UTC days). Each bar says in text what it is (the bars'
 *  places are decoration: the list beside them has the same facts). */
export function reservationTimeline(reservations, { onlyNode = null, label = 'Reservations by node' } = {}) {
  const rows = new Map();
  for (const r of reservations) {
    for (const n of r.properties.reservedNodes || []) {
      if (onlyNode && n.id.toLowerCase() !== onlyNode.toLowerCase()) continue;
      const key = n.id.toLowerCase();
      if (!rows.has(key)) rows.set(key, { id: n.id, bars: [] });
      rows.get(key).bars.push({ r, devices: n.devices });
    }
  }
  if (!rows.size) return nothing;
  const windows = [...rows.values()].flatMap((row) => row.bars.map(({ r }) => [Date.parse(r.properties.startTime), Date.parse(r.properties.endTime)]));
  const day = 24 * HOUR;
  const from = Math.floor(Math.min(...windows.map(([s]) => s)) / day) * day;
  const to = Math.ceil(Math.max(...windows.map(([, e]) => e)) / day) * day;
  const span = to - from || day;
  const pct = (ms) => ((ms - from) / span) * 100;
  return html`<figure class="reservation-timeline" aria-label=${label}>
    <figcaption class="small muted">${utc(from)} to ${utc(to)}</figcaption>
    <ul class="tl">${[...rows.values()].sort((a, b) => a.id.localeCompare(b.id)).map((row) => {
      const node = parseId(row.id);
      return html`<li class="tl-row" data-node=${node.name}><span class="tl-node">${node.name}</span>
        <ul class="tl-track" aria-label=${`Reservations on ${node.name}`}>${row.bars
          .sort((a, b) => Date.parse(a.r.properties.startTime) - Date.parse(b.r.properties.startTime))
          .map(({ r, devices }) => {
            const s = Date.parse(r.properties.startTime);
            const e = Date.parse(r.properties.endTime);
            const text = `${r.name}: ${devices} devices, ${utc(s)} to ${utc(e)}, ${r.properties.state}`;
            return html`<li class="tl-bar tl-${r.properties.state.toLowerCase()}" data-reservation=${r.name} title=${text}
              style="left:${pct(s)}%;width:max(${pct(e) - pct(s)}%, 4px)"><span class="visually-hidden">${text}</span><span aria-hidden="true">${r.name}</span></li>`;
          })}</ul></li>`;
    })}</ul>
  </figure>`;
}

/** `YYYY-MM-DD` of a UTC day. */
function utcDay(ms) {
  return new Date(ms).toISOString().slice(0, 10);
}

class Reservations extends View {
  static properties = { book: { attribute: false }, reservations: { state: true }, showBook: { state: true }, booked: { state: true }, cancelled: { state: true } };

  constructor() {
    super();
    this.reservations = [];
    this.showBook = false;
  }

  connectedCallback() {
    super.connectedCallback();
    this.showBook = Boolean(this.book) && this.app.may('reservations/book');
    this.load();
    // a reservation's state moves with the clock (Scheduled → Active → Expired): read again every 30 s
    this.every('live', 30000, () => this.read(), 'list');
  }

  load() {
    return this.track('list', () => this.read());
  }

  async read() {
    this.reservations = await this.api.all(paths.reservations(this.ctx.sub, this.ctx.rg), { $top: 1000 });
    this.reservations.forEach((r) => this.app.noteGroup(parseId(r.id).rg));
  }

  /** PUT the booking; 201 booked, 200 the same booking was there already; an error (409 InsufficientCapacity naming
   *  the window and the nodes that block it, BudgetExceeded, QuotaExceeded...) is shown as the API said it. */
  async submit(e) {
    e.preventDefault();
    const v = formValues(e.target);
    const start = Date.parse(`${v.startDate}T${String(v.startHour).padStart(2, '0')}:00:00Z`);
    const iso = (ms) => new Date(ms).toISOString().replace(/\.000Z$/, 'Z');
    const accelerator = { kind: v.kind, count: Number(v.count) };
    if (v.model) accelerator.model = v.model;
    if (v.memoryGb) accelerator.memoryGb = Number(v.memoryGb);
    if (Number(v.nodes) > 1) accelerator.nodes = Number(v.nodes);
    const body = { location: v.location, properties: { accelerator, startTime: iso(start), endTime: iso(start + Number(v.hours) * HOUR) } };
    this.booked = null;
    this.cancelled = null;
    const r = await this.track('book', () => this.api.request('PUT', paths.reservation(this.ctx.sub, v.rg, v.name), { body }));
    if (r) {
      this.booked = { reservation: r.body, again: r.status === 200 };
      this.showBook = false;
      this.app.noteGroup(v.rg);
      this.load();
    }
  }

  async cancel(r) {
    const id = parseId(r.id);
    this.booked = null;
    const done = await this.track('cancel', () => this.api.request('DELETE', paths.reservation(this.ctx.sub, id.rg, r.name)));
    if (done) {
      this.cancelled = { name: r.name, begun: r.properties.state !== 'Scheduled', gone: done.status === 204 };
      this.load();
    }
  }

  render() {
    return html`<h1>Reservations</h1>
      <p class="muted">Devices booked for a future window on whole UTC hours: billed for every hour of the window, used or not, at the price locked when booked. Cancelled before the window starts, nothing is billed; once it has started, the whole window is.</p>
      <div class="toolbar">
        ${offered(this.app, 'reservations/book', 'Book capacity', html`<button @click=${() => (this.showBook = !this.showBook)} aria-expanded=${this.showBook}>Book capacity</button>`)}
        <button class="secondary" @click=${() => this.load()}>Refresh</button>
      </div>
      ${this.showBook ? this.renderBook() : nothing}
      ${this.renderOutcome()}
      ${error(this.cancelError)}
      <p class="muted">Reservations the API lets you see in ${this.ctx.rg ? `resource group ${this.ctx.rg}` : `subscription ${this.ctx.sub}`}${this.app.may('reservations/book') ? '' : ' (a supplier sees those booked on its nodes: what it sold)'}.</p>
      ${loading(this.listLoading && !this.reservations.length, 'Loading reservations')} ${error(this.listError)}
      ${!this.listLoading && !this.listError && !this.reservations.length ? html`<p class="empty">No reservations.</p>` : nothing}
      ${this.reservations.length ? this.renderList() : nothing}`;
  }

  renderOutcome() {
    if (this.booked) {
      const r = this.booked.reservation;
      const p = r.properties;
      const id = parseId(r.id);
      return html`<p class="ok booked" role="status">Reservation <strong>${r.name}</strong> ${this.booked.again ? 'was booked already, as asked' : 'booked'}
        (${id.rg}) on ${(p.reservedNodes || []).map((n) => parseId(n.id).name).join(', ')}: ${p.hours} hours at ${p.billingTerms.pricePerAcceleratorHour ?? p.billingTerms.pricePerGpuHour} ${p.billingTerms.currency} per device-hour, ${p.totalCost.amount} ${p.totalCost.currency} in all.</p>`;
    }
    if (this.cancelled) {
      const c = this.cancelled;
      const what = c.gone ? 'did not exist: nothing cancelled' : c.begun ? 'cancelled; its window had begun, so it is billed whole' : 'cancelled before its window: nothing is billed';
      return html`<p class="ok" role="status">Reservation ${c.name} ${what}.</p>`;
    }
    return nothing;
  }

  renderList() {
    const sorted = [...this.reservations].sort((a, b) => Date.parse(a.properties.startTime) - Date.parse(b.properties.startTime) || a.name.localeCompare(b.name));
    return html`${reservationTimeline(sorted)}
      <div class="table-wrap"><table class="list" aria-label="Reservations">
        <thead><tr><th scope="col">Name</th><th scope="col">State</th><th scope="col">Books</th><th scope="col">Window</th><th scope="col">Nodes</th><th scope="col">Total cost</th><th scope="col">Booked by</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
        <tbody>${sorted.map((r) => {
          const p = r.properties;
          return html`<tr data-reservation=${r.name}><td>${r.name}</td><td>${reservationState(p.state)}</td><td>${bookedText(p)}</td>
            <td>${time(p.startTime, true)} – ${time(p.endTime, true)} <span class="small muted">(${p.hours} h)</span></td><td>${heldOn(p)}</td>
            <td>${costs([p.totalCost])}</td><td>${p.bookedBy}</td>
            <td class="row-actions">${p.state === 'Expired' || !this.app.may('reservations/cancel') ? nothing : confirmed(this, `cancel-${r.id}`, {
              label: 'Cancel…', group: `Confirm cancelling ${r.name}`,
              question: p.state === 'Scheduled' ? `Cancel ${r.name}? Nothing is billed.` : `Cancel ${r.name}? Its window has begun: it is billed whole.`,
              confirmLabel: 'Cancel reservation', act: () => this.cancel(r),
            })}</td></tr>`;
        })}</tbody></table></div>
      ${loading(this.cancelLoading, 'Cancelling')}`;
  }

  renderBook() {
    const b = this.book || {};
    const now = Date.now();
    const tomorrow = utcDay(now + 24 * HOUR);
    return html`<form class="card form" aria-label="Book capacity" @submit=${(e) => this.submit(e)}>
      <h2>Book capacity</h2>
      <div class="grid">
        ${field('Name', 'res-name', html`<input id="res-name" name="name" required pattern=${NAME_PATTERN} maxlength="63" aria-describedby="res-name-help" />`, NAME_HELP)}
        ${field('Resource group', 'res-rg', html`<input id="res-rg" name="rg" required pattern=${RG_PATTERN} maxlength="90" .value=${this.app.defaultGroup} />`)}
        ${field('Location', 'res-location', html`<input id="res-location" name="location" required maxlength="64" .value=${b.location || 'us-east-1'} />`)}
        ${field('Accelerator kind', 'res-kind', html`<select id="res-kind" name="kind">${KINDS.map((k) => html`<option value=${k} ?selected=${k === (b.kind || 'GPU')}>${k}</option>`)}</select>`)}
        ${field('Model (optional)', 'res-model', html`<input id="res-model" name="model" maxlength="64" .value=${b.model || ''} />`)}
        ${field('Devices per node', 'res-count', html`<input id="res-count" name="count" type="number" min="1" max="64" required value="1" />`)}
        ${field('Nodes at once', 'res-nodes', html`<input id="res-nodes" name="nodes" type="number" min="1" max="16" required value="1" />`)}
        ${field('Device memory per node (GiB, optional)', 'res-memory', html`<input id="res-memory" name="memoryGb" type="number" min="0" max="65536" />`)}
        ${field('Start date (UTC)', 'res-date', html`<input id="res-date" name="startDate" type="date" required min=${utcDay(now)} max=${utcDay(now + MAX_AHEAD_DAYS * 24 * HOUR)} .value=${tomorrow} />`)}
        ${field('Start hour (UTC)', 'res-hour', html`<select id="res-hour" name="startHour">${Array.from({ length: 24 }, (_, h) => html`<option value=${h} ?selected=${h === 9}>${String(h).padStart(2, '0')}:00</option>`)}</select>`)}
        ${field('Hours', 'res-hours', html`<input id="res-hours" name="hours" type="number" min="1" max=${MAX_HOURS} required value="8" aria-describedby="res-hours-help" />`, `1 to ${MAX_HOURS} (28 days), starting at most ${MAX_AHEAD_DAYS} days ahead`)}
      </div>
      <p class="small muted">The provider books the window on nodes free for all of it, at their price now, locked; the answer names them and the total. A window that is taken is refused, naming the nodes that block it.</p>
      <button type="submit" ?disabled=${this.bookLoading}>Book</button>
      ${loading(this.bookLoading, 'Booking')} ${error(this.bookError)}
    </form>`;
  }
}
customElements.define('itl-reservations', Reservations);
