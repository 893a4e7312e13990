// Presentation helpers: times in the user's time zone (UTC on hover), exact decimal sums of cost strings.
import { html, nothing } from 'lit';

const local = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
const localShort = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });

/** <time> in the user's time zone; its title (hover) is the same instant in UTC. */
export function time(iso, short = false) {
  if (!iso) return html`<span class="muted">—</span>`;
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const utc = d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  return html`<time datetime=${d.toISOString()} title=${utc}>${(short ? localShort : local).format(d)}</time>`;
}

const clockLocal = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });

/** <time> of the time of day, HH:MM:SS in the user's time zone (a figure's "as of"); its title the instant in UTC. */
export function clock(iso) {
  if (!iso) return html`<span class="muted">—</span>`;
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const utc = d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  return html`<time datetime=${d.toISOString()} title=${utc}>${clockLocal.format(d)}</time>`;
}

export const timeZone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'local time';

/** Exact sum of decimal strings (the API's cost amounts) per currency: {USD: '1.234000', ...}. */
export function sumCosts(costLists) {
  const totals = new Map();
  for (const list of costLists) {
    for (const c of list || []) {
      const prev = totals.get(c.currency) || { units: 0n, scale: 0 };
      const next = toUnits(c.amount);
      const scale = Math.max(prev.scale, next.scale);
      totals.set(c.currency, { units: rescale(prev, scale) + rescale(next, scale), scale });
    }
  }
  return [...totals.entries()].map(([currency, v]) => ({ currency, amount: fromUnits(v) }));
}

function toUnits(amount) {
  const s = String(amount).trim();
  const neg = s.startsWith('-');
  const [whole, frac = ''] = s.replace(/^[-+]/, '').split('.');
  const units = BigInt((whole || '0') + frac);
  return { units: neg ? -units : units, scale: frac.length };
}

function rescale(v, scale) {
  return v.units * 10n ** BigInt(scale - v.scale);
}

function fromUnits({ units, scale }) {
  const neg = units < 0n;
  const digits = (neg ? -units : units).toString().padStart(scale + 1, '0');
  const text = scale ? `${digits.slice(0, -scale)}.${digits.slice(-scale)}` : digits;
  return (neg ? '-' : '') + text;
}

/** "12.500000 USD" lines for a cost list, or a dash. */
export function costs(list) {
  if (!list || !list.length) return html`<span class="muted">—</span>`;
  return html`${list.map((c, i) => html`${i ? html`<br />` : nothing}<span class="money">${c.amount} ${c.currency}</span>`)}`;
}

export function number(n, digits = 0) {
  if (n === null || n === undefined) return '—';
  return Number(n).toLocaleString(undefined, { maximumFractionDigits: digits });
}
