// Ollama instances: the list across the nodes in view, provisioning with the operation's progress until the
// instance serves, and an instance's detail: endpoint, requests and tokens over time, delete.
import { html, nothing } from 'lit';
import { paths, parseId } from '../api.js';
import { instancesOf } from './spend.js';
import { View, loading, error, errors, offered, instanceState, copyButton, devices, kindOf, confirmed, statusBadge, field, formValues, link, NAME_PATTERN, NAME_HELP } from '../ui.js';
import { time, costs } from '../format.js';
import { fitStats } from '../chart.js';
import '../chart.js';

const FINAL = ['Succeeded', 'Failed', 'Canceled'];

/** Who an instance's cost is billed to, for a caller it is not billed to: instances are provisioned by admins and
 *  billed to the subscription's admins (the cost query bills a consumer her own jobs, a supplier pays nothing). */
export function instanceCostNote(app) {
  if (app.may('charges/all')) return nothing;
  return html` <span class="small muted instance-cost-note">(not billed to you: an instance is provisioned, and paid for, by the subscription’s admins)</span>`;
}

class Instances extends View {
  static properties = { nodes: { state: true }, rows: { state: true }, progress: { state: true }, showCreate: { state: true } };

  constructor() {
    super();
    this.nodes = [];
    this.rows = [];
    this.progress = null;
    this.showCreate = false;
    this.failures = [];
  }

  connectedCallback() {
    super.connectedCallback();
    this.load();
    // the list stays current (another user's instance, a deletion) without a loading state
    // (one request per node: every 15 s, four at a time, so 50 nodes stay well under the per-caller read limit)
    this.every('live', 15000, async () => this.show(await this.read()), 'list');
  }

  disconnectedCallback() {
    super.disconnectedCallback();
    this.gone = true;
  }

  load() {
    return this.track('list', async () => this.show(await this.read()));
  }

  /** The nodes in view and the instances of each (every node: a failed instance holds no devices but is listed). */
  async read() {
    const nodes = await this.api.all(paths.nodes(this.ctx.sub, this.ctx.rg));
    return { nodes, ...(await instancesOf(this.api, this.ctx.sub, nodes)) };
  }

  show({ nodes, instances, refused }) {
    this.nodes = nodes;
    this.rows = instances;
    this.failures = refused.map((r) => r.error);
  }

  async provision(e) {
    e.preventDefault();
    const v = formValues(e.target);
    const node = parseId(v.node);
    const body = { name: v.name, model: v.model, gpus: Number(v.gpus), memoryGb: Number(v.memoryGb) };
    const accepted = await this.track('create', () => this.api.request('POST', paths.instances(this.ctx.sub, node.rg, node.name), { body }));
    if (!accepted) return;
    this.showCreate = false;
    const target = { rg: node.rg, node: node.name, name: v.name };
    this.progress = { ...target, operation: { status: 'Accepted' }, instance: accepted.body };
    const statusUrl = accepted.body.status_url || accepted.headers.get('Azure-AsyncOperation');
    this.load();
    await this.track('progress', async () => {
      const final = await this.api.waitOperation(statusUrl, (op) => (this.progress = { ...this.progress, operation: op }));
      const instance = await this.api.get(paths.instance(this.ctx.sub, target.rg, target.node, target.name)).catch(() => null);
      this.progress = { ...this.progress, operation: final, instance };
    });
    if (!this.gone) this.load();
  }

  render() {
    return html`<h1>Instances</h1>
      <p class="muted">Ollama LLM instances on the nodes of ${this.ctx.rg ? `resource group ${this.ctx.rg}` : `subscription ${this.ctx.sub}`}.</p>
      <div class="toolbar">
        ${offered(this.app, 'instances/provision', 'Provision an instance', html`<button @click=${() => (this.showCreate = !this.showCreate)} aria-expanded=${this.showCreate}>Provision an instance</button>`)}
        <button class="secondary" @click=${() => this.load()}>Refresh</button>
      </div>
      ${this.showCreate ? this.renderCreate() : nothing}
      ${this.progress ? this.renderProgress() : nothing}
      ${loading(this.listLoading, 'Loading instances')} ${error(this.listError)} ${errors(this.failures, 'nodes')}
      ${!this.listLoading && !this.listError && !this.rows.length ? html`<p class="empty">No instances here yet.</p>` : nothing}
      ${this.rows.length ? html`<div class="table-wrap"><table class="list" aria-label="Instances">
        <thead><tr><th scope="col">Name</th><th scope="col">Node</th><th scope="col">Model</th><th scope="col">GPUs</th><th scope="col">State</th><th scope="col">Endpoint</th><th scope="col">Created</th></tr></thead>
        <tbody>${this.rows.map((i) => html`<tr>
          <td><a href=${link('instances', i.rg, i.node, i.name)}>${i.name}</a></td><td>${i.node}</td><td>${i.properties.model}</td><td>${i.properties.gpus}</td>
          <td>${instanceState(i.properties.provisioningState)}</td><td>${i.properties.endpoint ? html`<code>${i.properties.endpoint}</code>` : '—'}</td>
          <td>${time(i.systemData && i.systemData.createdAt, true)}</td></tr>`)}</tbody></table></div>` : nothing}`;
  }

  renderCreate() {
    return html`<form class="card form" @submit=${(e) => this.provision(e)} aria-label="Provision an instance">
      <h2>Provision an Ollama instance</h2>
      <div class="grid">
        ${field('Node', 'inst-node', html`<select id="inst-node" name="node" required>
          ${this.nodes.map((n) => html`<option value=${n.id}>${n.name} (${parseId(n.id).rg}, ${devices(n.properties.capacity).free} ${kindOf(n.properties)}s free)</option>`)}</select>`)}
        ${field('Name', 'inst-name', html`<input id="inst-name" name="name" required pattern=${NAME_PATTERN} maxlength="63" aria-describedby="inst-name-help" />`, NAME_HELP)}
        ${field('Model', 'inst-model', html`<input id="inst-model" name="model" required maxlength="601" value="mistral:7b" aria-describedby="inst-model-help" />`, 'An Ollama model name, e.g. mistral:7b')}
        ${field('GPUs', 'inst-gpus', html`<input id="inst-gpus" name="gpus" type="number" required min="1" max="64" step="1" value="1" />`)}
        ${field('GPU memory (GiB)', 'inst-mem', html`<input id="inst-mem" name="memoryGb" type="number" required min="1" max="65536" step="1" value="40" />`)}
      </div>
      <button type="submit" ?disabled=${this.createLoading || !this.nodes.length}>Provision</button>
      ${this.nodes.length ? nothing : html`<p class="muted">No node to provision on.</p>`}
      ${error(this.createError)}
    </form>`;
  }

  renderProgress() {
    const p = this.progress;
    const op = p.operation || {};
    const done = FINAL.includes(op.status);
    const endpoint = p.instance && p.instance.properties && p.instance.properties.endpoint;
    return html`<section class="card progress" aria-label="Provisioning ${p.name}" aria-live="polite">
      <h2>Provisioning ${p.name} on ${p.node}</h2>
      <p>Operation: ${statusBadge(op.status)} ${op.percentComplete !== undefined && op.percentComplete !== null ? html`<progress max="100" value=${op.percentComplete} aria-label="Percent complete"></progress> ${op.percentComplete}%` : nothing}
        ${done ? nothing : html`<span class="spinner" aria-hidden="true"></span>`}</p>
      ${op.startTime ? html`<p class="small">Started ${time(op.startTime)}${op.endTime ? html`, ended ${time(op.endTime)}` : nothing}</p>` : nothing}
      ${op.error ? error(op.error) : nothing} ${error(this.progressError)}
      ${done && op.status === 'Succeeded' ? html`<p class="ok" role="status">${p.name} serves at <code class="endpoint">${endpoint}</code>.</p> ${copyButton(endpoint, 'Endpoint')}` : nothing}
      <a href=${link('instances', p.rg, p.node, p.name)}>Open ${p.name}</a>
    </section>`;
  }
}
customElements.define('itl-instances', Instances);

class InstanceDetail extends View {
  static properties = { rg: {}, node: {}, name: {}, instance: { state: true }, stats: { state: true }, hours: { state: true }, deleted: { state: true }, deleting: { state: true } };

  constructor() {
    super();
    this.instance = null;
    this.stats = null;
    this.hours = 24;
  }

  get path() {
    return paths.instance(this.ctx.sub, this.rg, this.node, this.name);
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
    await this.track('instance', async () => (this.instance = await this.api.get(this.path)));
    if (!this.instance) return;
    this.loadStats();
    this.follow();
  }

  /** Read it again every 2 s while work runs on it, every 10 s once it serves or failed (another user may delete
   *  it); never while the tab is hidden. */
  follow() {
    clearTimeout(this.timer);
    const state = this.instance && this.instance.properties.provisioningState;
    if (this.gone || !this.instance || this.deleted) return;
    this.timer = setTimeout(async () => {
      try {
        if (document.visibilityState !== 'hidden') this.instance = await this.api.get(this.path);
        this.instanceError = null;
      } catch (err) {
        if (err.status === 404 && this.deleting) {
          this.deleted = true;
          return;
        }
        this.instanceError = err;
      }
      this.follow();
    }, FINAL.includes(state) ? 10000 : 2000);
  }

  loadStats() {
    return this.track('stats', async () => (this.stats = await this.api.get(`${this.path}/stats`, { hours: this.hours })));
  }

  async remove() {
    const r = await this.track('action', () => this.api.request('DELETE', this.path));
    if (!r) return;
    if (r.status === 204) {
      this.deleted = true;
      return;
    }
    this.deleting = true;
    this.instance = { ...this.instance, properties: { ...this.instance.properties, provisioningState: 'Deleting' } };
    this.follow();
  }

  render() {
    const i = this.instance;
    return html`<p><a href="#/instances">← Instances</a></p><h1>Instance ${this.name}</h1>
      ${loading(this.instanceLoading, 'Loading the instance')} ${error(this.instanceError)}
      ${this.deleted ? html`<p class="ok" role="status">Instance ${this.name} deleted; its GPUs are free again.</p>` : i ? this.renderInstance(i) : nothing}`;
  }

  renderInstance(i) {
    const p = i.properties;
    const state = p.provisioningState;
    return html`<div class="cards">
      <section class="card" aria-label="Instance">
        <dl class="props">
          <dt>State</dt><dd>${instanceState(state)} ${FINAL.includes(state) ? nothing : html`<span class="spinner" role="img" aria-label="in progress"></span>`}</dd>
          <dt>Endpoint</dt><dd>${p.endpoint ? html`<code class="endpoint">${p.endpoint}</code> ${copyButton(p.endpoint, 'Endpoint')}` : '—'}</dd>
          <dt>Id</dt><dd><code class="resource-id">${i.id}</code> ${copyButton(i.id, 'Id')}</dd>
          <dt>Model</dt><dd>${p.model}</dd>
          <dt>Node</dt><dd><a href=${link('nodes', this.rg, this.node)}>${this.node}</a></dd>
          <dt>GPUs</dt><dd>${p.gpus} (${p.memoryGb} GiB GPU memory)</dd>
          <dt>Created</dt><dd>${time(i.systemData.createdAt)} by ${i.systemData.createdBy}</dd>
        </dl>
        ${p.error ? error(p.error) : nothing}
        <div class="toolbar">
          ${offered(this.app, 'instances/delete', 'Delete…', confirmed(this, 'delete', {
            label: 'Delete…', group: 'Confirm deletion', question: `Delete ${this.name}?`, confirmLabel: 'Delete instance', act: () => this.remove(), disabled: state === 'Deleting',
          }))}
        </div>
        ${loading(this.actionLoading, 'Deleting')} ${error(this.actionError)}
      </section>
      <section class="card" aria-label="Requests and tokens">
        <h2>Requests and tokens</h2>
        <form class="inline" @submit=${(e) => { e.preventDefault(); this.hours = Number(formValues(e.target).hours); this.loadStats(); }}>
          ${field('Hours', 'inst-hours', html`<input id="inst-hours" name="hours" type="number" min="1" max="720" step="1" required .value=${String(this.hours)} />`)}
          <button type="submit">Show</button>
        </form>
        ${loading(this.statsLoading, 'Loading usage')} ${error(this.statsError)}
        ${this.stats ? html`<p class="totals">Over ${this.stats.hours} h: ${this.stats.totals.requests ?? 0} requests, ${this.stats.totals.tokensIn ?? 0} tokens in,
            ${this.stats.totals.tokensOut ?? 0} tokens out; cost <span class="instance-cost">${costs(this.stats.totals.cost)}</span>${instanceCostNote(this.app)}</p>
          ${(() => {
            const fit = fitStats(this.stats);
            return html`<itl-chart .title=${`Requests and tokens per ${fit.per}`} .points=${fit.points} .step=${fit.step} .note=${fit.note}
              .series=${[{ key: 'requests', label: 'Requests' }, { key: 'tokensIn', label: 'Tokens in' }, { key: 'tokensOut', label: 'Tokens out' }]}></itl-chart>`;
          })()}` : nothing}
      </section></div>`;
  }
}
customElements.define('itl-instance-detail', InstanceDetail);
