// The shell: header (who, subscription and resource group), navigation, and the view of the URL's hash.
import { html, nothing } from 'lit';
import { Api } from './api.js';
import { View, error } from './ui.js';
import { timeZone } from './format.js';
import { allows, refusal } from './permissions.js';
import './views/overview.js';
import './views/nodes.js';
import './views/instances.js';
import './views/jobs.js';
import './views/reservations.js';
import './views/usage.js';
import './views/costs.js';
import './views/activity.js';

const VIEWS = [
  ['overview', 'Overview'],
  ['nodes', 'Nodes'],
  ['instances', 'Instances'],
  ['jobs', 'Jobs'],
  ['reservations', 'Reservations'],
  ['usage', 'Usage and cost'],
  ['costs', 'Costs'],
  ['activity', 'Activity log'],
];

class App extends View {
  static properties = { route: { state: true }, context: { state: true }, sessionEnded: { state: true }, navOpen: { state: true } };

  constructor() {
    super();
    // the route is read when the shell connects: a sign-in puts the link it started from back into the address bar
    // (history.replaceState, no hashchange) after this element is made and before it connects
    this.route = { view: 'overview', args: [], query: {} };
    this.context = { sub: '', rg: '' };
    this.sessionEnded = null;
    this.navOpen = false;
    this.knownGroups = new Set();
    this.onHash = () => {
      this.route = parseHash();
      this.navOpen = false;
      // a new view: keyboard and screen reader users continue at its content, as after a page load
      this.updateComplete.then(() => {
        const main = this.querySelector('#main');
        if (main && !main.contains(document.activeElement)) main.focus({ preventScroll: true });
      });
    };
  }

  connectedCallback() {
    super.connectedCallback();
    this.route = parseHash();
    window.addEventListener('hashchange', this.onHash);
    this._api = new Api(this.config.apiBaseUrl || '', () => this.auth.accessToken(), (err) => (this.sessionEnded = err));
    const scopes = this.auth.user ? this.auth.identity.scopes : [];
    const saved = JSON.parse(sessionStorage.getItem('itl-context') || 'null');
    const subs = this.subscriptions(scopes);
    if (saved && subs.includes(saved.sub)) this.context = saved;
    else this.context = { sub: subs[0] || '', rg: this.groupsOf(scopes, subs[0]).length === 1 && !this.wholeSub(scopes, subs[0]) ? this.groupsOf(scopes, subs[0])[0] : '' };
  }

  disconnectedCallback() {
    super.disconnectedCallback();
    window.removeEventListener('hashchange', this.onHash);
  }

  get api() {
    return this._api;
  }

  subscriptions(scopes) {
    return [...new Set(scopes.map((s) => s.split('/')[2]).filter(Boolean))];
  }

  groupsOf(scopes, sub) {
    return scopes.filter((s) => s.split('/')[2] === sub && s.split('/')[4]).map((s) => s.split('/')[4]);
  }

  wholeSub(scopes, sub) {
    return scopes.some((s) => s.split('/').length === 3 && s.split('/')[2] === sub);
  }

  /** Remember a resource group seen in a listed resource (offered in the picker). */
  noteGroup(rg) {
    if (rg && !this.knownGroups.has(rg)) {
      this.knownGroups.add(rg);
      this.requestUpdate();
    }
  }

  setContext(change) {
    // a resource's page belongs to its subscription: another subscription shows the list of its kind instead (the
    // route is read at once, so the view made for the new context is the list, not the resource it does not have)
    if (change.sub !== undefined && this.route.args.length) {
      location.hash = `#/${this.route.view}`;
      this.route = parseHash();
    }
    this.context = { ...this.context, ...change };
    sessionStorage.setItem('itl-context', JSON.stringify(this.context));
  }

  /** Whether the signed-in user's roles hold `action` (permissions.js): what the portal offers; the API decides. */
  may(action) {
    return allows(this.auth.identity.roles, action);
  }

  /** Whether the user's token holds the whole subscription in view (not only some of its resource groups): what the
   *  subscription-level operations (the activity log, setting budgets and quotas) need besides the role. */
  holdsSubscription() {
    return this.wholeSub(this.auth.identity.scopes, this.context.sub);
  }

  /** Why `action` (permissions.js) is not offered to the user — its roles, or a scope of only some resource groups
   *  for an action of the whole subscription — or null when it is. */
  refusal(action) {
    return refusal(this.auth.identity.roles, this.holdsSubscription(), action);
  }

  /** Why the activity log is not the user's to read (null when it is). Never asked of the API for them: it would
   *  answer 403 and write a Denied entry into the admins' audit log. */
  activityRefusal() {
    return this.refusal('activity/read');
  }

  /** Put `hash` in the address bar for a bookmark, keeping the view as it is (no new view, no history entry). */
  replaceHash(hash) {
    history.replaceState(null, '', hash);
    this.route = parseHash();
    const outlet = this.querySelector('#view');
    if (outlet) outlet.dataset.key = `${location.hash}|${this.context.sub}|${this.context.rg}`;
  }

  /** The resource group a create form starts with: the selected one, else the caller's first. */
  get defaultGroup() {
    const scopes = this.auth.identity.scopes;
    return this.context.rg || this.groupsOf(scopes, this.context.sub)[0] || [...this.knownGroups][0] || 'rg1';
  }

  render() {
    if (!this.auth.user) return this.renderSignIn();
    const id = this.auth.identity;
    const subs = this.subscriptions(id.scopes);
    const groups = [...new Set([...this.groupsOf(id.scopes, this.context.sub), ...this.knownGroups])].sort();
    return html`
      <a class="skip" href="#main" @click=${(e) => { e.preventDefault(); document.getElementById('main').focus(); }}>Skip to content</a>
      <header class="top">
        <button class="nav-toggle secondary" aria-expanded=${this.navOpen} aria-controls="nav" @click=${() => (this.navOpen = !this.navOpen)}>Menu</button>
        <a class="brand" href="#/overview">ITL Accelerator</a>
        <div class="context">
          <label for="ctx-sub">Subscription</label>
          <select id="ctx-sub" @change=${(e) => this.setContext({ sub: e.target.value, rg: '' })}>
            ${subs.map((s) => html`<option value=${s} ?selected=${s === this.context.sub}>${s}</option>`)}
          </select>
          <label for="ctx-rg">Resource group</label>
          <input id="ctx-rg" list="ctx-rg-list" placeholder="all" .value=${this.context.rg} size="10"
            @change=${(e) => this.setContext({ rg: e.target.value.trim() })} />
          <datalist id="ctx-rg-list">${groups.map((g) => html`<option value=${g}></option>`)}</datalist>
        </div>
        <div class="who">
          <span class="who-name" title=${id.subject}>${id.name}</span>
          <span class="small muted who-roles">${id.roles.filter((r) => r.startsWith('itl-accelerator-')).map((r) => r.replace('itl-accelerator-', '')).join(', ') || 'no roles'}</span>
          <button class="secondary" @click=${() => this.auth.signOut()}>Sign out</button>
        </div>
      </header>
      <div class="layout">
        <nav id="nav" class=${this.navOpen ? 'open' : ''} aria-label="Views" @click=${(e) => e.target.closest('a') && (this.navOpen = false)}>
          <ul>
            ${VIEWS.filter(([key]) => key !== 'activity' || !this.activityRefusal()).map(([key, label]) => html`<li><a href="#/${key}" aria-current=${this.route.view === key ? 'page' : 'false'}>${label}</a></li>`)}
          </ul>
          <p class="small muted">Times in ${timeZone}; hover for UTC.</p>
        </nav>
        <main id="main" tabindex="-1">
          ${this.sessionEnded
            ? html`<div class="error" role="alert">Your session has ended (${this.sessionEnded.code}: ${this.sessionEnded.message})
                <button @click=${() => this.auth.signIn()}>Sign in again</button></div>`
            : nothing}
          ${subs.length ? nothing : html`<div class="error" role="alert">Your token holds no subscription scope: the API will show you nothing.</div>`}
          <div id="view"></div>
        </main>
      </div>`;
  }

  /** The view of the route, made anew whenever the route or the context changes (each view loads what it shows
   *  when it connects). The shell manages this one element itself, outside its own template. */
  updated() {
    const outlet = this.querySelector('#view');
    if (!outlet) return;
    const key = `${location.hash}|${this.context.sub}|${this.context.rg}`;
    if (outlet.dataset.key === key && outlet.firstElementChild) return;
    outlet.dataset.key = key;
    outlet.replaceChildren(this.subscriptions(this.auth.identity.scopes).length ? this.makeView() : '');
  }

  makeView() {
    const a = this.route.args;
    const q = this.route.query;
    const make = (tag, props = {}) => Object.assign(document.createElement(tag), props);
    switch (this.route.view) {
      case 'nodes':
        return a.length >= 2 ? make('itl-node-detail', { rg: a[0], name: a[1] }) : make('itl-nodes');
      case 'instances':
        return a.length >= 3 ? make('itl-instance-detail', { rg: a[0], node: a[1], name: a[2] }) : make('itl-instances');
      case 'jobs':
        return a.length >= 2 ? make('itl-job-detail', { rg: a[0], name: a[1] }) : make('itl-jobs', { mine: q.mine === '1' });
      case 'reservations':
        return make('itl-reservations', { book: q.book === '1' ? { kind: q.kind || '', model: q.model || '', location: q.location || '' } : null });
      case 'usage':
        return make('itl-usage', { resourceId: q.resource || '', hours: q.hours || '24' });
      case 'costs':
        return make('itl-costs', { params: q });
      case 'activity':
        return make('itl-activity', { resourceId: q.resource || '' });
      default:
        return make('itl-overview');
    }
  }

  renderSignIn() {
    return html`<main id="main" class="signin" tabindex="-1">
      <h1>ITL Accelerator portal</h1>
      <p>GPU nodes, Ollama instances, jobs, usage and the audit trail of the ITL Accelerator provider.</p>
      ${this.loginError ? error({ code: 'LoginFailed', message: this.loginError.message }) : nothing}
      <button @click=${() => this.auth.signIn()}>Sign in</button>
    </main>`;
  }
}
customElements.define('itl-app', App);

function parseHash() {
  const [path, q = ''] = location.hash.replace(/^#\/?/, '').split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { view: parts[0] || 'overview', args: parts.slice(1), query: Object.fromEntries(new URLSearchParams(q)) };
}

