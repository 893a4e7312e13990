// The provider's ARM API, as the portal calls it: bearer token, ARM error bodies, nextLink paging, long-running
// operations. No business rule lives here: every decision (who may, what is valid) is the API's answer.

export const PROVIDER = 'ITL.Accelerator';

/** An error answered by the API (ARM body {error: {code, message, target, details}}) or met on the way. */
export class ApiError extends Error {
  constructor(status, code, message, target = null, details = [], requestId = null) {
    super(message);
    this.status = status; // HTTP status; 0 when the request never got an answer
    this.code = code;
    this.target = target;
    this.details = details || [];
    this.requestId = requestId;
  }
}

export class Api {
  /**
   * @param {string} baseUrl the API's base URL ('' when the portal is served from the API's own origin)
   * @param {() => Promise<string|null>} token returns the current access token
   * @param {(err: ApiError) => void} onUnauthenticated called on 401 (the session has ended)
   */
  constructor(baseUrl, token, onUnauthenticated = () => {}) {
    this.baseUrl = baseUrl.replace(/\/$/, '');
    this.token = token;
    this.onUnauthenticated = onUnauthenticated;
  }

  url(pathOrUrl, query) {
    const url = new URL(/^https?:/.test(pathOrUrl) ? pathOrUrl : this.baseUrl + pathOrUrl, location.href);
    for (const [k, v] of Object.entries(query || {})) {
      if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, v);
    }
    return url.toString();
  }

  /** One request. Resolves {status, headers, body}; rejects with ApiError for any status >= 400. */
  async request(method, pathOrUrl, { query, body, headers = {} } = {}) {
    const token = await this.token();
    const init = { method, headers: { Accept: 'application/json', ...headers } };
    if (token) init.headers.Authorization = `Bearer ${token}`;
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(this.url(pathOrUrl, query), init);
    } catch (err) {
      throw new ApiError(0, 'NetworkError', `The API could not be reached (${err.message}).`);
    }
    const text = await response.text();
    let parsed = null;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = null;
      }
    }
    const requestId = response.headers.get('x-ms-request-id');
    if (response.status >= 400) {
      const e = parsed && parsed.error;
      const error = e
        ? new ApiError(response.status, e.code, e.message, e.target, e.details, requestId)
        : new ApiError(response.status, `Http${response.status}`, (parsed && parsed.message) || response.statusText || 'Request failed', null, [], requestId);
      if (response.status === 401) this.onUnauthenticated(error);
      throw error;
    }
    return { status: response.status, headers: response.headers, body: parsed };
  }

  get(path, query) {
    return this.request('GET', path, { query }).then((r) => r.body);
  }

  /** A page {value, nextLink}; pass nextLink (an absolute URL) as path to get the next one. */
  page(pathOrNextLink, query) {
    return this.get(pathOrNextLink, /^https?:/.test(pathOrNextLink) ? undefined : query);
  }

  /** Every item of a collection, following nextLink (at most maxPages pages). */
  async all(path, query, maxPages = 20) {
    const items = [];
    let page = await this.page(path, query);
    items.push(...page.value);
    for (let n = 1; page.nextLink && n < maxPages; n++) {
      page = await this.page(page.nextLink);
      items.push(...page.value);
    }
    return items;
  }

  /** GET an operation status URL until it ends (Succeeded, Failed, Canceled); onUpdate(status) after each read. */
  async waitOperation(url, onUpdate, { signal } = {}) {
    for (;;) {
      const r = await this.request('GET', url);
      onUpdate(r.body);
      if (['Succeeded', 'Failed', 'Canceled'].includes(r.body.status)) return r.body;
      const after = Math.min(5, Math.max(1, Number(r.headers.get('Retry-After')) || 1));
      await new Promise((resolve) => setTimeout(resolve, after * 1000));
      if (signal && signal.aborted) return r.body;
    }
  }
}

/** ARM paths of the provider. */
export const paths = {
  rg: (sub, rg) => `/subscriptions/${enc(sub)}/resourceGroups/${enc(rg)}/providers/${PROVIDER}`,
  sub: (sub) => `/subscriptions/${enc(sub)}/providers/${PROVIDER}`,
  nodes: (sub, rg) => (rg ? `${paths.rg(sub, rg)}/sparkNodes` : `${paths.sub(sub)}/sparkNodes`),
  node: (sub, rg, name) => `${paths.rg(sub, rg)}/sparkNodes/${enc(name)}`,
  instances: (sub, rg, node) => `${paths.node(sub, rg, node)}/sparkOllamaInstances`,
  instance: (sub, rg, node, name) => `${paths.instances(sub, rg, node)}/${enc(name)}`,
  jobs: (sub, rg) => (rg ? `${paths.rg(sub, rg)}/sparkJobs` : `${paths.sub(sub)}/sparkJobs`),
  job: (sub, rg, name) => `${paths.rg(sub, rg)}/sparkJobs/${enc(name)}`,
  reservations: (sub, rg) => (rg ? `${paths.rg(sub, rg)}/capacityReservations` : `${paths.sub(sub)}/capacityReservations`),
  reservation: (sub, rg, name) => `${paths.rg(sub, rg)}/capacityReservations/${enc(name)}`,
  audit: (sub) => `${paths.sub(sub)}/auditEvents`,
  offers: (sub, location) => `${paths.sub(sub)}/locations/${enc(location)}/offers`,
  billingExport: (sub, day) => `${paths.sub(sub)}/billingExports/${enc(day)}`,
};

function enc(s) {
  return encodeURIComponent(s);
}

/** The parts of an ARM id: {sub, rg, node, name, kind} for nodes, instances, jobs and capacity reservations. */
export function parseId(id) {
  const m = /^\/subscriptions\/([^/]+)\/resourceGroups\/([^/]+)\/providers\/ITL\.Accelerator\/(sparkNodes|sparkJobs|capacityReservations)\/([^/]+)(?:\/sparkOllamaInstances\/([^/]+))?/i.exec(id || '');
  if (!m) return null;
  const [, sub, rg, type, first, child] = m.map((x) => (x === undefined ? x : decodeURIComponent(x)));
  if (child) return { sub, rg, node: first, name: child, kind: 'instance' };
  const kind = { sparknodes: 'node', sparkjobs: 'job', capacityreservations: 'reservation' }[type.toLowerCase()];
  return { sub, rg, name: first, node: kind === 'node' ? first : undefined, kind };
}
