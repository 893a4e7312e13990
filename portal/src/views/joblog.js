// A job's log, as the API serves it (GET .../sparkJobs/{name}/logs, docs/API_REFERENCE.md "Job logs"): the last
// lines at first, then each page's nextLink, followed while the job runs — an empty page means "nothing new yet",
// asked again 2 s later — until the API says the log is complete. Lines keep the numbers the API gives them.
import { html, nothing } from 'lit';
import { repeat } from 'lit/directives/repeat.js';
import { View, loading, error } from '../ui.js';
import { time } from '../format.js';

/** Lines shown at most (the oldest are dropped past it; the API keeps them all). */
const KEEP = 2000;
/** Lines read first: the end of the log. */
const TAIL = 200;

class JobLog extends View {
  static properties = { path: {}, lines: { state: true }, complete: { state: true }, jobStatus: { state: true } };

  constructor() {
    super();
    this.lines = [];
    this.complete = false;
    this.next = null;
  }

  connectedCallback() {
    super.connectedCallback();
    this.track('log', async () => this.take(await this.api.get(`${this.path}/logs`, { tail: TAIL })));
  }

  disconnectedCallback() {
    super.disconnectedCallback();
    clearTimeout(this.timer);
  }

  /** Shows a page's lines and asks for the next one: at once when the page was full, 2 s later when it was not. */
  take(page) {
    const box = this.querySelector('.log');
    const atEnd = !box || box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
    this.lines = [...this.lines, ...page.value].slice(-KEEP);
    this.jobStatus = page.jobStatus;
    this.complete = Boolean(page.complete) || !page.nextLink;
    this.next = page.nextLink;
    // a reader at the end keeps seeing the newest line; one who scrolled up keeps their place
    if (atEnd) this.updateComplete.then(() => { const b = this.querySelector('.log'); if (b) b.scrollTop = b.scrollHeight; });
    if (this.complete || !this.isConnected) return;
    this.timer = setTimeout(() => this.follow(), page.value.length ? 0 : 2000);
  }

  async follow() {
    if (!this.isConnected || !this.next) return;
    if (document.visibilityState === 'hidden') {
      this.timer = setTimeout(() => this.follow(), 2000);
      return;
    }
    try {
      this.take(await this.api.get(this.next));
      this.logError = null;
    } catch (err) {
      this.logError = err; // shown; tried again
      this.requestUpdate();
      this.timer = setTimeout(() => this.follow(), 5000);
    }
  }

  render() {
    const state = this.complete ? 'End of the log.' : this.lines.length ? 'Following the job: new lines appear as it writes them.' : 'No lines yet: the job has not written any.';
    return html`<section class="card" aria-label="Log">
      <h2>Log</h2>
      ${loading(this.logLoading, 'Loading the log')} ${error(this.logError)}
      ${this.lines.length
        ? html`<pre class="log" role="log" aria-label="Job log" tabindex="0">${repeat(this.lines, (l) => l.lineNumber, (l) => html`<span class="log-line"><span class="log-no" aria-hidden="true">${l.lineNumber}</span> ${l.text}\n</span>`)}</pre>`
        : nothing}
      ${this.logLoading ? nothing : html`<p class="small muted log-state" role="status">${state}${this.lines.length ? html` Last line written ${time(this.lines[this.lines.length - 1].time)}.` : nothing}</p>`}
    </section>`;
  }
}
customElements.define('itl-job-log', JobLog);
