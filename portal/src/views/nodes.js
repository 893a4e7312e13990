// Nodes: the list (with accelerator bars), registration, and a node's detail: capacity, price, availability, delete,
// its instances, and (for its supplier and admins, as the API decides) utilisation and earnings over time.
import { html, nothing } from 'lit';
import { paths, parseId } from '../api.js';
import { View, KINDS, loading, error, offered, instanceState, confirmed, copyButton, kindOf, gpuBar, acceleratorText, pricePerHour, statusBadge, more, field, formValues, link, NAME_PATTERN, NAME_HELP, RG_PATTERN } from '../ui.js';
import { time, costs } from '../format.js';
import { fitStats, statsCurrencies } from '../chart.js';
import { mayReadNodeStats } from '../permissions.js';
import '../chart.js';
import { reservationTimeline, reservationState } from './reservations.js';

/** A node's accelerator kind (`GPU` for one stored before kinds existed). */
class Nodes extends View {
  static properties = { nodes: { state: true }, nextLink: { state: true }, created: { state: true }, showCreate: { state: true } };

  constructor() {
    super();
    this.nodes = [];
    this.nextLink = null;
    this.showCreate = false;
  }

  connectedCallback() {
    super.connectedCallback();
    this.load();
    this.every('live', 5000, () => this.read(), 'list');
  }

  load() {
    return this.track('list', () => this.read());
  }

  /** The nodes shown so far read again in one request ($top: as many as are listed, 50 at least, at most the
   *  API's 1000), so "Load more" keeps its place and every listed row stays current. */
  async read() {
    if (this.moreLoading || this.nodes.length > 1000) return; // "Load more" under way, or past what one request reads
    const generation = (this.generation = (this.generation || 0) + 1);
    const top = Math.min(1000, Math.max(50, this.nodes.length));
    const page = await this.api.page(paths.nodes(this.ctx.sub, this.ctx.rg), { $top: top });
    if (generation !== this.generation || this.moreLoading) return; // a newer read, or a "Load more", answered since
    this.nodes = page.value;
    this.nextLink = page.nextLink;
    page.value.forEach((n) => this.app.noteGroup(parseId(n.id).rg));
  }

  loadMore() {
    this.generation = (this.generation || 0) + 1;
    return this.track('more', async () => {
      const page = await this.api.page(this.nextLink);
      this.nodes = [...this.nodes, ...page.value];
      this.nextLink = page.nextLink;
    });
  }

  async create(e) {
    e.preventDefault();
    const v = formValues(e.target);
    // what the node holds, one kind and model of device (the API's accelerator; a GPU's vendor defaults to NVIDIA)
    const accelerator = { kind: v.kind, model: v.gpuModel, count: Number(v.gpus), memoryGbPerDevice: Number(v.gpuMemoryGb) };
    if (v.vendor) accelerator.vendor = v.vendor;
    const body = {
      name: v.name,
      location: v.location,
      sku: { name: v.sku, capacity: Number(v.gpus) },
      properties: {
        owner: v.owner,
        accelerator,
        pricing: { currency: v.currency, pricePerAcceleratorHour: Number(v.price) },
      },
    };
    const made = await this.track('create', () => this.api.request('POST', paths.nodes(this.ctx.sub, v.rg), { body }));
    if (made) {
      this.created = made.body;
      this.showCreate = false;
      this.app.noteGroup(v.rg);
      await this.load();
    }
  }

  render() {
    return html`<h1>Nodes</h1>
      <p class="muted">Accelerator nodes (GPUs, TPUs, NPUs…) of ${this.ctx.rg ? html`resource group <strong>${this.ctx.rg}</strong>` : html`subscription <strong>${this.ctx.sub}</strong>`}.</p>
      <div class="toolbar">
        ${offered(this.app, 'nodes/register', 'Register a node', html`<button @click=${() => (this.showCreate = !this.showCreate)} aria-expanded=${this.showCreate}>Register a node</button>`)}
        <button class="secondary" @click=${() => this.load()}>Refresh</button>
      </div>
      ${this.showCreate ? this.renderCreate() : nothing}
      ${this.created ? html`<p class="ok" role="status">Node ${this.created.name} registered.</p>` : nothing}
      ${loading(this.listLoading, 'Loading nodes')} ${error(this.listError)}
      ${!this.listLoading && !this.listError && !this.nodes.length ? html`<p class="empty">No nodes here yet.</p>` : nothing}
      ${this.nodes.length ? html`<div class="table-wrap"><table class="list" aria-label="Nodes">
        <thead><tr><th scope="col">Name</th><th scope="col">Resource group</th><th scope="col">Allocated</th><th scope="col">Accelerators</th>
          <th scope="col">Price per device-hour</th><th scope="col">Availability</th><th scope="col">Owner</th><th scope="col">Created</th></tr></thead>
        <tbody>${this.nodes.map((n) => {
          const id = parseId(n.id);
          const p = n.properties;
          return html`<tr>
            <td><a href=${link('nodes', id.rg, n.name)}>${n.name}</a></td><td>${id.rg}</td><td class="bar-cell">${gpuBar(p.capacity, kindOf(p))}</td>
            <td>${acceleratorText(p)}</td>
            <td>${p.pricing ? `${pricePerHour(p.pricing)} ${p.pricing.currency}` : '—'}</td>
            <td>${statusBadge(p.availability)}</td><td>${p.owner}</td><td>${time(n.systemData && n.systemData.createdAt, true)}</td></tr>`;
        })}</tbody></table></div>` : nothing}
      ${more(this.nextLink, () => this.loadMore(), this.moreLoading)} ${error(this.moreError)}`;
  }

  renderCreate() {
    const me = this.app.auth.identity.subject;
    return html`<form class="card form" @submit=${(e) => this.create(e)} aria-label="Register a node">
      <h2>Register a node</h2>
      <div class="grid">
        ${field('Name', 'node-name', html`<input id="node-name" name="name" required pattern=${NAME_PATTERN} maxlength="63" aria-describedby="node-name-help" />`, NAME_HELP)}
        ${field('Resource group', 'node-rg', html`<input id="node-rg" name="rg" required pattern=${RG_PATTERN} maxlength="90" .value=${this.app.defaultGroup} />`)}
        ${field('Location', 'node-location', html`<input id="node-location" name="location" required pattern="[A-Za-z0-9][A-Za-z0-9 _\\-]*" maxlength="64" value="us-east-1" />`)}
        ${field('SKU', 'node-sku', html`<input id="node-sku" name="sku" required maxlength="64" value="DGX-H100-8GPU" />`)}
        ${field('Accelerator kind', 'node-kind', html`<select id="node-kind" name="kind">${KINDS.map((k) => html`<option value=${k}>${k}</option>`)}</select>`)}
        ${field('Vendor (optional for GPUs: NVIDIA; TPUs: Google)', 'node-vendor', html`<input id="node-vendor" name="vendor" maxlength="64" placeholder="NVIDIA, AMD, Google, Huawei…" />`)}
        ${field('Devices', 'node-gpus', html`<input id="node-gpus" name="gpus" type="number" required min="1" max="64" step="1" value="8" />`)}
        ${field('Model', 'node-gpu-model', html`<input id="node-gpu-model" name="gpuModel" required maxlength="58" value="H100" />`)}
        ${field('Memory per device (GiB)', 'node-gpu-mem', html`<input id="node-gpu-mem" name="gpuMemoryGb" type="number" required min="1" max="1024" step="1" value="80" />`)}
        ${field('Owner (supplier subject)', 'node-owner', html`<input id="node-owner" name="owner" required maxlength="256" .value=${me} />`)}
        ${field('Currency', 'node-currency', html`<input id="node-currency" name="currency" required pattern="[A-Z]{3}" maxlength="3" value="USD" />`, 'ISO 4217, e.g. USD')}
        ${field('Price per device-hour', 'node-price', html`<input id="node-price" name="price" type="number" required min="0" step="any" value="2.5" />`)}
      </div>
      <button type="submit" ?disabled=${this.createLoading}>${this.createLoading ? 'Registering…' : 'Register'}</button>
      ${error(this.createError)}
    </form>`;
  }
}
customElements.define('itl-nodes', Nodes);

class NodeDetail extends View {
  static properties = { rg: {}, name: {}, node: { state: true }, instances: { state: true }, reservations: { state: true }, stats: { state: true }, hours: { state: true }, deleted: { state: true }, message: { state: true } };

  constructor() {
    super();
    this.node = null;
    this.instances = [];
    this.reservations = [];
    this.stats = null;
    this.hours = 24;
  }

  connectedCallback() {
    super.connectedCallback();
    this.load();
    this.every('live', 5000, () => this.refresh());
  }

  get path() {
    return paths.node(this.ctx.sub, this.rg, this.name);
  }

  /** The node and its instances read again (every 5 s while shown), without a loading state. */
  async refresh() {
    if (this.deleted || !this.node) return;
    try {
      const [node, instances] = await Promise.all([this.api.get(this.path), this.api.all(paths.instances(this.ctx.sub, this.rg, this.name))]);
      [this.node, this.instances, this.nodeError] = [node, instances, null];
    } catch (err) {
      this.nodeError = err;
    }
  }

  async load() {
    await this.track('node', async () => (this.node = await this.api.get(this.path)));
    if (!this.node) return;
    this.track('instances', async () => (this.instances = await this.api.all(paths.instances(this.ctx.sub, this.rg, this.name))));
    this.loadReservations();
    // a node's figures are its supplier's and the admins' (docs/RBAC.md): nobody else's roles are asked for them
    if (mayReadNodeStats(this.app.auth.identity, this.node)) this.loadStats();
  }

  /** The reservations on this node the caller may see (docs/RBAC.md: a supplier those booked on its nodes, what it
   *  sold; a consumer its own; admins all), from the subscription's list (a reservation lives in its booker's resource
   *  group, not the node's) — or the node's resource group's for a token holding only some of them. */
  loadReservations() {
    const rg = this.app.holdsSubscription() ? '' : this.rg;
    return this.track('reservations', async () => {
      const all = await this.api.all(paths.reservations(this.ctx.sub, rg), { $top: 1000 });
      const id = this.node.id.toLowerCase();
      this.reservations = all.filter((r) => (r.properties.reservedNodes || []).some((n) => n.id.toLowerCase() === id));
    });
  }

  loadStats() {
    return this.track('stats', async () => {
      this.stats = null;
      this.stats = await this.api.get(`${this.path}/stats`, { hours: this.hours });
    });
  }

  async patch(properties, what) {
    this.message = null;
    const r = await this.track('action', () => this.api.request('PATCH', this.path, { body: { properties }, headers: { 'If-Match': this.node.etag } }));
    if (r) {
      this.node = r.body;
      this.message = what;
    }
  }

  async remove() {
    const r = await this.track('action', () => this.api.request('DELETE', this.path));
    if (r) this.deleted = true;
  }

  /** Admins, and the supplier who owns the node (RBAC: sparkNodes/pricing/write on nodes it owns). */
  mayPrice(p) {
    const id = this.app.auth.identity;
    return this.app.may('nodes/delete') || (this.app.may('nodes/pricing') && p.owner === id.subject);
  }

  render() {
    if (this.deleted) return html`<h1>Node ${this.name}</h1><p class="ok" role="status">Node ${this.name} deleted.</p><a href="#/nodes">Back to nodes</a>`;
    const n = this.node;
    return html`<p><a href="#/nodes">← Nodes</a></p><h1>Node ${this.name}</h1>
      ${loading(this.nodeLoading, 'Loading the node')} ${error(this.nodeError)}
      ${n ? this.renderNode(n) : nothing}`;
  }

  renderNode(n) {
    const p = n.properties;
    const cordoned = p.availability === 'Cordoned';
    return html`<div class="cards">
        <section class="card" aria-label="Capacity">
          <h2>Capacity</h2>${gpuBar(p.capacity, kindOf(p))}
          <dl class="props">
            <dt>${kindOf(p)} memory</dt><dd>${p.capacity.allocatedMemoryGb} of ${p.capacity.totalMemoryGb} GiB allocated</dd>
            <dt>Hardware</dt><dd>${n.sku && n.sku.name} · ${acceleratorText(p)} (${(p.accelerator && p.accelerator.memoryGbPerDevice) || p.hardwareSpecs.gpuMemoryGb} GiB each)</dd>
            <dt>Id</dt><dd><code class="resource-id">${n.id}</code> ${copyButton(n.id, 'Id')}</dd>
            <dt>Location</dt><dd>${n.location}</dd>
            <dt>Owner</dt><dd>${p.owner}</dd>
            <dt>Availability</dt><dd>${statusBadge(p.availability)}</dd>
            <dt>Price</dt><dd><span id="node-price-now">${p.pricing ? `${pricePerHour(p.pricing)} ${p.pricing.currency}` : '—'}</span> per ${kindOf(p)}-hour</dd>
            <dt>Created</dt><dd>${time(n.systemData.createdAt)} by ${n.systemData.createdBy}</dd>
            <dt>Changed</dt><dd>${time(n.systemData.lastModifiedAt)} by ${n.systemData.lastModifiedBy}</dd>
          </dl>
        </section>
        <section class="card" aria-label="Actions">
          <h2>Price and availability</h2>
          ${this.mayPrice(p)
            ? html`<form class="inline" @submit=${(e) => { e.preventDefault(); const v = formValues(e.target); this.patch({ pricing: { pricePerAcceleratorHour: Number(v.price), currency: v.currency } }, 'Price changed.'); }}>
            ${field(`New price per ${kindOf(p)}-hour`, 'price-new', html`<input id="price-new" name="price" type="number" min="0" step="any" required .value=${String(p.pricing ? pricePerHour(p.pricing) : '')} />`)}
            ${field('Currency', 'price-currency', html`<input id="price-currency" name="currency" pattern="[A-Z]{3}" required maxlength="3" .value=${p.pricing ? p.pricing.currency : 'USD'} />`)}
            <button type="submit">Set price</button>
          </form>`
            : html`<p class="muted small not-offered">Setting the price, cordoning and uncordoning are for admins and the node’s supplier (${p.owner}).</p>`}
          <div class="toolbar">
            ${this.mayPrice(p) ? html`<button @click=${() => this.patch({ availability: cordoned ? 'Available' : 'Cordoned' }, cordoned ? 'Node uncordoned.' : 'Node cordoned: no new work is placed on it.')}>${cordoned ? 'Uncordon' : 'Cordon'}</button>` : nothing}
            ${offered(this.app, 'nodes/delete', 'Delete…', confirmed(this, 'delete', {
              label: 'Delete…', group: 'Confirm deletion', question: `Delete ${this.name}?`, confirmLabel: 'Delete node', act: () => this.remove(),
            }))}
          </div>
          ${loading(this.actionLoading, 'Saving')} ${error(this.actionError)}
          ${this.message ? html`<p class="ok" role="status">${this.message}</p>` : nothing}
        </section>
      </div>
      <section class="card" aria-label="Instances on this node">
        <h2>Instances on this node</h2>
        ${loading(this.instancesLoading, 'Loading instances')} ${error(this.instancesError)}
        ${this.instances.length
          ? html`<ul>${this.instances.map((i) => html`<li><a href=${link('instances', this.rg, this.name, i.name)}>${i.name}</a> ${i.properties.model} · ${i.properties.gpus} GPUs ${instanceState(i.properties.provisioningState)}</li>`)}</ul>`
          : this.instancesLoading ? nothing : html`<p class="empty">None.</p>`}
        ${this.app.may('instances/provision') ? html`<a href="#/instances">Provision an instance</a>` : nothing}
      </section>
      ${this.renderReservations(n)}
      ${this.renderFigures(p)}`;
  }

  /** The windows booked on this node: a time line and a list (a supplier sees what it sold). */
  renderReservations(n) {
    const sold = n.properties.owner === this.app.auth.identity.subject;
    const title = sold ? 'Reservations on this node (what you sold)' : 'Reservations on this node';
    return html`<section class="card" aria-label="Reservations on this node">
      <h2>${title}</h2>
      ${loading(this.reservationsLoading && !this.reservations.length, 'Loading reservations')} ${error(this.reservationsError)}
      ${this.reservations.length
        ? html`${reservationTimeline(this.reservations, { onlyNode: n.id, label: `Reservations on ${n.name} in time` })}
          <ul class="node-reservations">${this.reservations.map((r) => {
            const p = r.properties;
            const held = p.reservedNodes.find((x) => x.id.toLowerCase() === n.id.toLowerCase());
            return html`<li data-reservation=${r.name}><a href=${link('reservations')}>${r.name}</a> ${reservationState(p.state)} ${held.devices} ${kindOf(p)}s,
              ${time(p.startTime, true)} – ${time(p.endTime, true)} (${p.hours} h), booked by ${p.bookedBy}</li>`;
          })}</ul>`
        : this.reservationsLoading ? nothing : html`<p class="empty">None you may see.</p>`}
    </section>`;
  }

  /** Utilisation and earnings for whoever may read them (admins, the node's supplier); for others the reason, and a
   *  supplier who may have owned the node before may still ask for its own earnings on it. */
  renderFigures(p) {
    const id = this.app.auth.identity;
    if (!mayReadNodeStats(id, this.node) && !this.stats && !this.statsError && !this.statsLoading) {
      const formerOwner = this.app.may('nodes/stats');
      return html`<section class="card" aria-label="Utilisation and earnings">
        <h2>Utilisation and earnings</h2>
        <p class="muted not-offered">A node’s utilisation and earnings are for admins and its supplier (${p.owner}).</p>
        ${formerOwner ? html`<p class="small">If you supplied this node before, your own earnings on it are yours to read:
          <button class="secondary" @click=${() => this.loadStats()}>Show my earnings on ${this.name}</button></p>` : nothing}
      </section>`;
    }
    return html`
      <section class="card" aria-label="Utilisation and earnings">
        <h2>Utilisation and earnings</h2>
        <form class="inline" @submit=${(e) => { e.preventDefault(); this.hours = Number(formValues(e.target).hours); this.loadStats(); }}>
          ${field('Hours', 'node-hours', html`<input id="node-hours" name="hours" type="number" min="1" max="720" step="1" required .value=${String(this.hours)} />`)}
          <button type="submit">Show</button>
        </form>
        ${loading(this.statsLoading, 'Loading usage')} ${error(this.statsError)}
        ${this.stats ? this.renderStats(this.stats) : nothing}
      </section>`;
  }

  renderStats(stats) {
    const fit = fitStats(stats);
    const currencies = statsCurrencies(stats);
    const kind = kindOf(this.node.properties);
    return html`<p class="totals" aria-label="Totals">Earnings over ${stats.hours} h: <strong class="earnings">${costs(stats.totals.cost)}</strong>
        · ${stats.totals.gpuHours ?? 0} ${kind}-hours</p>
      <itl-chart .title=${`${kind} utilisation and allocation per ${fit.per}`} .points=${fit.points} .step=${fit.step} .note=${fit.note}
        .series=${[{ key: 'gpuUtilizationPercent', label: 'Utilisation', unit: '%' }, { key: 'allocatedPercent', label: 'Allocated', unit: '%' }]}></itl-chart>
      <itl-chart bars .title=${`Earnings per ${fit.per}`} .points=${fit.points} .step=${fit.step} .note=${fit.note} .series=${currencies.map((c) => ({ key: `cost_${c}`, label: 'Earnings', unit: c }))}></itl-chart>`;
  }
}
customElements.define('itl-node-detail', NodeDetail);
