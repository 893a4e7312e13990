// Activity log: the subscription's audit events (admins, as the API decides), newest first unless asked otherwise,
// by time range, resource and actor (each a parameter of the API's query: a page is what the API answered), paged
// with nextLink.
import { html, nothing } from 'lit';
import { paths } from '../api.js';
import { View, loading, error, more, field, formValues } from '../ui.js';
import { time } from '../format.js';

function localInput(date) {
  const d = new Date(date.getTime() - date.getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 16);
}

/** "Running → Succeeded" from an event's states (objects: status, provisioningState or availability). */
function transition(e) {
  const word = (st) => (st ? st.status || st.provisioningState || st.availability || 'present' : '∅');
  return e.previous_state || e.new_state ? `${word(e.previous_state)} → ${word(e.new_state)}` : '';
}

/** An action name (`ITL.Accelerator/sparkJobs/cancel/action`) that wraps only after a '/' when its cell is narrow:
 *  each part kept whole, a line break offered after each '/'. */
function actionName(action) {
  const parts = String(action || '').split('/');
  return parts.map((part, i) => html`<span class="action-part">${part}${i < parts.length - 1 ? '/' : ''}</span>${i < parts.length - 1 ? html`<wbr />` : nothing}`);
}

class Activity extends View {
  static properties = { resourceId: {}, events: { state: true }, nextLink: { state: true }, filters: { state: true } };

  constructor() {
    super();
    this.events = [];
    this.nextLink = null;
    const now = new Date();
    this.filters = { start: localInput(new Date(now.getTime() - 24 * 3600 * 1000)), end: '', top: '25', order: 'desc' };
  }

  connectedCallback() {
    super.connectedCallback();
    this.filters = { ...this.filters, resource: this.resourceId || '' };
    // the audit events are for admins holding the whole subscription: for anyone else the API would only answer 403
    // (and log a Denied entry), so it is not asked
    this.refusal = this.app.activityRefusal();
    if (!this.refusal) this.load();
  }

  load() {
    const f = this.filters;
    // a newer load supersedes an older one still under way: only the latest answer is shown (a slow first load
    // answering after the user's filter would otherwise replace the filtered events)
    const generation = (this.generation = (this.generation || 0) + 1);
    return this.track('list', async () => {
      this.events = [];
      this.nextLink = null; // the old filter's next page is not this one's
      const page = await this.api.page(paths.audit(this.ctx.sub), {
        startTime: f.start ? new Date(f.start).toISOString() : undefined,
        endTime: f.end ? new Date(f.end).toISOString() : undefined,
        resourceId: f.resource || undefined,
        actor: f.actor || undefined,
        $orderby: f.order === 'asc' ? undefined : 'timestamp desc',
        $top: f.top,
      });
      if (generation !== this.generation) return;
      this.events = page.value;
      this.nextLink = page.nextLink;
    });
  }

  loadMore() {
    const generation = this.generation;
    return this.track('more', async () => {
      const page = await this.api.page(this.nextLink);
      if (generation !== this.generation) return;
      this.events = [...this.events, ...page.value];
      this.nextLink = page.nextLink;
    });
  }

  apply(e) {
    e.preventDefault();
    const v = formValues(e.target);
    this.filters = { start: v.start || '', end: v.end || '', resource: v.resource || '', actor: (v.actor || '').trim(), top: v.top || '25', order: v.order || 'desc' };
    this.load();
  }

  render() {
    if (this.refusal) {
      return html`<h1>Activity log</h1>
        <p class="not-offered-view" role="status">${this.refusal} It holds the subscription's audit trail: who changed what, and every refused request.</p>
        <p>What you may see of your own work is on the <a href="#/jobs">Jobs</a>, <a href="#/usage">Usage and cost</a> and <a href="#/costs">Costs</a> views.</p>`;
    }
    const f = this.filters;
    const shown = this.events;
    return html`<h1>Activity log</h1>
      <form class="card form" @submit=${(e) => this.apply(e)} aria-label="Filter the activity log">
        <div class="grid">
          ${field('From (your time)', 'act-start', html`<input id="act-start" name="start" type="datetime-local" .value=${f.start} />`)}
          ${field('To (your time)', 'act-end', html`<input id="act-end" name="end" type="datetime-local" .value=${f.end} />`)}
          ${field('Resource id', 'act-resource', html`<input id="act-resource" name="resource" maxlength="1024" .value=${f.resource || ''} placeholder="/subscriptions/…" />`)}
          ${field('Actor (user id, or SYSTEM)', 'act-actor', html`<input id="act-actor" name="actor" maxlength="256" .value=${f.actor || ''} />`)}
          ${field('Order', 'act-order', html`<select id="act-order" name="order"><option value="desc" ?selected=${f.order !== 'asc'}>Newest first</option><option value="asc" ?selected=${f.order === 'asc'}>Oldest first</option></select>`)}
          ${field('Page size', 'act-top', html`<input id="act-top" name="top" type="number" min="1" max="1000" step="1" .value=${f.top} />`)}
        </div>
        <button type="submit">Apply</button>
      </form>
      ${loading(this.listLoading, 'Loading events')} ${error(this.listError)}
      ${!this.listLoading && !this.listError && !shown.length ? html`<p class="empty">No events.</p>` : nothing}
      ${shown.length ? html`<p class="muted small">${shown.length} events shown, ${f.order === 'asc' ? 'oldest' : 'newest'} first${this.nextLink ? '; more to load' : ''}.</p>
        <div class="table-wrap"><table class="list" aria-label="Audit events">
        <thead><tr><th scope="col">Time</th><th scope="col">Actor</th><th scope="col">Action</th><th scope="col">Outcome</th><th scope="col">Resource</th><th scope="col">Change</th></tr></thead>
        <tbody>${shown.map((e) => html`<tr>
          <td>${time(e.timestamp)}</td><td>${e.actor_display_name || e.actor_id} <span class="muted small">${e.actor_type}</span></td>
          <td class="action-cell"><code class="action">${actionName(e.action)}</code></td><td>${e.outcome}</td>
          <td class="resource-cell"><a href=${`#/activity?resource=${encodeURIComponent(e.resource_id)}`} title=${e.resource_id}>${e.resource_name || e.resource_id}</a></td>
          <td>${e.change_summary || transition(e)}</td></tr>`)}</tbody>
        </table></div>` : nothing}
      ${more(this.nextLink, () => this.loadMore(), this.moreLoading)} ${error(this.moreError)}`;
  }
}
customElements.define('itl-activity', Activity);
