// Shared pieces: the light-DOM base element, loading and error states, paging, accelerator bars.
import { LitElement, html, nothing } from 'lit';

/** The accelerator kinds the forms offer: those the API knows, in their usual spelling, as its OpenAPI document says
 *  them (`kind`'s examples; build.mjs puts them here). The API takes others too: an open set. */
// eslint-disable-next-line no-undef
export const KINDS = ACCELERATOR_KINDS;

/** Views render into the light DOM so the one stylesheet applies and labels/ids work across the page. */
export class View extends LitElement {
  createRenderRoot() {
    return this;
  }

  /** The app shell (api, auth, context); set by the shell before the view connects. */
  get app() {
    return document.querySelector('itl-app');
  }

  get api() {
    return this.app.api;
  }

  get ctx() {
    return this.app.context;
  }

  disconnectedCallback() {
    super.disconnectedCallback();
    for (const loop of (this.polls || new Map()).values()) clearTimeout(loop.timer);
    this.polls = new Map();
  }

  /** Call `fn` every `ms` (a number, or a function answering it for each turn) while the view is on the page,
   *  skipping the turns when the tab is hidden (a background tab asks the API nothing); one poll per `key`, restarted
   *  by calling again (the older loop stops). A failed turn shows its error in this[errorKey + 'Error'] (the view's
   *  own error slot) and the next successful one clears it. */
  every(key, ms, fn, errorKey = key) {
    this.polls = this.polls || new Map();
    clearTimeout((this.polls.get(key) || {}).timer);
    const loop = {};
    const wait = typeof ms === 'function' ? ms : () => ms;
    const turn = async () => {
      if (!this.isConnected || this.polls.get(key) !== loop) return;
      if (document.visibilityState !== 'hidden') {
        try {
          await fn();
          if (this[`${errorKey}Error`]) this[`${errorKey}Error`] = null;
        } catch (err) {
          this[`${errorKey}Error`] = err;
        }
        this.requestUpdate();
      }
      if (this.isConnected && this.polls.get(key) === loop) loop.timer = setTimeout(turn, wait());
    };
    this.polls.set(key, loop);
    loop.timer = setTimeout(turn, wait());
  }

  /** Run fn with a loading flag in this[key + 'Loading'] and its error in this[key + 'Error']. */
  async track(key, fn) {
    this[`${key}Loading`] = true;
    this[`${key}Error`] = null;
    this.requestUpdate();
    try {
      return await fn();
    } catch (err) {
      this[`${key}Error`] = err;
      return undefined;
    } finally {
      this[`${key}Loading`] = false;
      this.requestUpdate();
    }
  }
}

export function loading(on, what = 'Loading') {
  return on ? html`<p class="loading" role="status"><span class="spinner" aria-hidden="true"></span>${what}…</p>` : nothing;
}

/** An API error as the API said it: code, message, target, details. */
export function error(err) {
  if (!err) return nothing;
  const code = err.code || 'Error';
  return html`<div class="error" role="alert">
    <strong class="error-code">${code}</strong>${err.status ? html` <span class="muted">(HTTP ${err.status})</span>` : nothing}:
    <span class="error-message">${err.message}</span>
    ${err.target ? html`<div class="muted">target: <code>${err.target}</code></div>` : nothing}
    ${(err.details || []).length
      ? html`<ul>${err.details.map((d) => html`<li><strong>${d.code}</strong>: ${d.message}${d.target ? html` (<code>${d.target}</code>)` : nothing}</li>`)}</ul>`
      : nothing}
    ${err.requestId ? html`<div class="muted small">request id ${err.requestId}</div>` : nothing}
  </div>`;
}

/** Several answers' errors, each distinct one (code and message) once, with how many requests it answered: the
 *  same refusal for every node of a list is one error, not one per node. */
export function errors(list, what = 'requests') {
  const seen = new Map();
  for (const err of list || []) {
    const key = `${err.code}|${err.message}`;
    const entry = seen.get(key) || { err, count: 0 };
    entry.count += 1;
    seen.set(key, entry);
  }
  return html`${[...seen.values()].map(({ err, count }) => html`${error(err)}${count > 1 ? html`<p class="muted small">The same answer for ${count} ${what}.</p>` : nothing}`)}`;
}

/** A node's or job's accelerator in words: `8 × Google TPU v5e`, `2 × NVIDIA GPU`, `2 × GPU (any vendor)` (the seed's GPU fields when a node has none). */
export function acceleratorText(props) {
  const a = (props && props.accelerator) || {};
  const kind = a.kind || 'GPU';
  const count = a.count ?? (props && (props.requestedGpus ?? (props.hardwareSpecs && props.hardwareSpecs.gpuCount)));
  const model = a.model || (props && (props.gpuModel || (props.hardwareSpecs && props.hardwareSpecs.gpuModel))) || '';
  // a job asking any vendor's devices says so after them ("2 × GPU (any vendor)"), not as if "Any" made them
  const anyVendor = a.vendor && a.vendor.toLowerCase() === 'any';
  return `${count ?? '?'} × ${a.vendor && !anyVendor ? `${a.vendor} ` : ''}${kind}${model ? ` ${model}` : ''}${anyVendor ? ' (any vendor)' : ''}`;
}

/** A node's price per device-hour of its kind (`pricePerGpuHour`, the seed's name, for one stored without the other). */
export function pricePerHour(pricing) {
  if (!pricing) return null;
  return pricing.pricePerAcceleratorHour ?? pricing.pricePerGpuHour;
}

/** The kind of a node's (or a job's) devices: its `accelerator.kind`, GPU for one stored before kinds existed. */
export function kindOf(props) {
  return (props && props.accelerator && props.accelerator.kind) || 'GPU';
}

/** {total, used, free} devices of a node's `capacity` (the seed's `*Gpus` names for one stored without the others). */
export function devices(capacity) {
  const c = capacity || {};
  return {
    total: c.totalAccelerators ?? c.totalGpus ?? 0,
    used: c.allocatedAccelerators ?? c.allocatedGpus ?? 0,
    free: c.freeAccelerators ?? c.freeGpus ?? 0,
  };
}

/** Allocated/free devices of a node (of its `kind`: GPUs, TPUs...) as a bar, with the numbers as text. */
export function gpuBar(capacity, kind = 'GPU') {
  if (!capacity) return html`<span class="muted">—</span>`;
  const { total, used, free } = devices(capacity);
  const pct = total ? Math.round((used / total) * 100) : 0;
  const label = `${used} of ${total} ${kind}s allocated, ${free} free`;
  return html`<div class="gpubar" role="meter" aria-valuemin="0" aria-valuemax=${total} aria-valuenow=${used} aria-label=${label} title=${label}>
      <span class="gpubar-used" style="width:${pct}%"></span>
    </div>
    <span class="small">${used}/${total} ${kind}s allocated · ${free} free</span>`;
}

export function statusBadge(status) {
  if (!status) return html`<span class="muted">—</span>`;
  const kind = { Succeeded: 'ok', Running: 'run', Failed: 'bad', Canceled: 'muted', Preempted: 'warn', Deleting: 'warn', Cordoned: 'warn', Available: 'ok' }[status] || 'wait';
  return html`<span class="badge badge-${kind}">${status}</span>`;
}

/** An instance's state in one word everywhere (list, its page, its node's page): an instance whose provisioning
 *  Succeeded serves, so it is "Serving" (the API's provisioningState on hover); the others as the API says them. */
export function instanceState(state) {
  if (state === 'Succeeded') return html`<span class="badge badge-ok" title="provisioningState: Succeeded">Serving</span>`;
  return statusBadge(state);
}

/** A "Load more" button for a list with a nextLink. */
export function more(nextLink, onClick, busy) {
  if (!nextLink) return nothing;
  return html`<button class="secondary" @click=${onClick} ?disabled=${busy}>${busy ? 'Loading…' : 'Load more'}</button>`;
}

export function field(label, id, input, help) {
  return html`<div class="field"><label for=${id}>${label}</label>${input}${help ? html`<small id="${id}-help" class="muted">${help}</small>` : nothing}</div>`;
}

/** Reads a form's named fields into an object (strings; empty ones left out). */
export function formValues(form) {
  const out = {};
  for (const [k, v] of new FormData(form).entries()) if (v !== '') out[k] = v;
  return out;
}

export const NAME_PATTERN = '[A-Za-z0-9]([A-Za-z0-9_.\\-]{0,61}[A-Za-z0-9_\\-])?';
export const NAME_HELP = '1–63 letters, digits, - _ . ; starts with a letter or digit, does not end with a dot';
export const RG_PATTERN = '[\\-\\w\\(\\)\\.]{0,89}[\\-\\w\\(\\)]';

/** A hash link to a view; args are encoded. */
export function link(view, ...args) {
  return `#/${[view, ...args.map(encodeURIComponent)].join('/')}`;
}

/** The button of `action` (permissions.js) when the user's roles hold it; otherwise the same button greyed out with
 *  the reason beside it, as Azure's portal does (the API would refuse it: 403 AuthorizationFailed). */
export function offered(app, action, label, button) {
  const why = app.refusal(action);
  if (!why) return button;
  const id = `why-${action.replace('/', '-')}`;
  return html`<span class="not-offered"><button type="button" class="secondary" disabled aria-describedby=${id}>${label}</button>
    <small id=${id} class="muted">${why}</small></span>`;
}

/** A destructive action behind a confirmation: the first click asks (`question`, in a group named `group`), the
 *  second acts; "Keep it" leaves everything as it was. Each `key` confirms on its own (view.confirming holds it). */
export function confirmed(view, key, { label, group, question, confirmLabel, act, disabled = false }) {
  // keyboard focus follows the question: to its confirm button, and back to the action after "Keep it"
  const set = (value, focus) => {
    view.confirming = value;
    view.requestUpdate();
    view.updateComplete.then(() => {
      const target = view.querySelector(`[data-confirm${focus === 'open' ? '-open' : ''}="${CSS.escape(key)}"]`);
      if (target) target.focus();
    });
  };
  if (view.confirming === key) {
    return html`<span role="group" aria-label=${group} class="confirm">${question}
      <button class="danger" data-confirm=${key} @click=${() => { view.confirming = null; view.requestUpdate(); act(); }}>${confirmLabel}</button>
      <button class="secondary" @click=${() => set(null, 'open')}>Keep it</button></span>`;
  }
  return html`<button class="danger" data-confirm-open=${key} ?disabled=${disabled} @click=${() => set(key, 'confirm')}>${label}</button>`;
}

/** A "Copy" button for `text` (an endpoint, an id): the clipboard, and a status saying it was copied (or how to copy
 *  it by hand when the browser refuses). */
/** Offer `text` as a file called `name` to save (a CSV the page built). */
export function saveFile(text, name, type = 'text/csv;charset=utf-8') {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([text], { type }));
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

export function copyButton(text, what) {
  const copy = async (e) => {
    const button = e.currentTarget;
    const note = button.nextElementSibling;
    try {
      await navigator.clipboard.writeText(text);
      note.textContent = `${what} copied.`;
    } catch {
      note.textContent = `The browser refused the clipboard: select the ${what.toLowerCase()} to copy it.`;
    }
  };
  return html`<button type="button" class="secondary copy" aria-label=${`Copy ${what.toLowerCase()}`} @click=${copy}>Copy</button><span class="small muted copy-note" aria-live="polite"></span>`;
}
