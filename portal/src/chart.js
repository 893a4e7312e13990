// A time-series chart (uPlot) with its data as a table for screen readers and keyboard users.
import { html, nothing } from 'lit';
import uPlot from 'uplot';
import { View } from './ui.js';
import { time } from './format.js';

const COLORS = ['#0b5cad', '#d9480f', '#2b8a3e', '#862e9c', '#e67700', '#0c8599', '#c2255c', '#5c940d'];
const hourLocal = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
const utcDay = (t) => new Date(t * 1000).toISOString().slice(0, 10);
const utcHour = (t) => new Date(t * 1000).toISOString().slice(11, 16);

/**
 * <itl-chart .title=${'...'} .points=${[{t: epochSeconds, ...}]} .series=${[{key, label, unit, format}]}
 *   .step=${'hour' | 'day'} .note=${caption text} .empty=${'...'}>
 * Draws one line (or bar) per series over time. Hours (the default step) are shown in the user's time zone with UTC
 * on hover, as every time of the portal; days are UTC days. `format` writes a series' values (legend and table);
 * `note` follows the title in the caption (the chart's text alternative); `empty` says why there is nothing to draw.
 */
export class Chart extends View {
  static properties = {
    title: {},
    points: { attribute: false },
    series: { attribute: false },
    bars: { type: Boolean },
    step: {},
    note: { attribute: false },
    empty: {},
  };

  constructor() {
    super();
    this.points = [];
    this.series = [];
    this.step = 'hour';
    this.note = nothing;
    this.empty = 'Nothing in this period.';
    this.plot = null;
  }

  disconnectedCallback() {
    super.disconnectedCallback();
    if (this.plot) this.plot.destroy();
    this.plot = null;
    if (this.resize) this.resize.disconnect();
    this.resize = null;
    this.observed = null;
  }

  updated() {
    const host = this.querySelector('.chart-canvas');
    if (this.plot) this.plot.destroy();
    this.plot = null;
    if (!host || !this.series.length) return;
    const width = Math.max(260, host.clientWidth || 600);
    const data = [this.points.map((p) => p.t), ...this.series.map((s) => this.points.map((p) => p[s.key] ?? null))];
    const stepSeconds = this.step === 'day' ? 86400 : 3600;
    // one y axis per unit (each currency its own, labelled with it: amounts are never drawn against another's scale)
    const units = [...new Set(this.series.map((s) => s.unit || ''))];
    const scaleOf = (s) => `y:${s.unit || ''}`;
    // axis text and grid in the page's own colours (the canvas is not styled by CSS: dark mode would draw black)
    const style = getComputedStyle(host);
    const ink = style.color;
    const grid = style.getPropertyValue('--line').trim() || '#d5dbe1';
    const opts = {
      width,
      height: 220,
      series: [
        // the hover legend: the hour in the user's time zone and in UTC, or the UTC day
        { label: this.step === 'day' ? 'Day (UTC)' : 'Time', value: (u, t) => (t === null || t === undefined ? '—' : this.when(t)) },
        ...this.series.map((s, i) => ({
          label: s.unit ? `${s.label} (${s.unit})` : s.label,
          scale: scaleOf(s),
          value: s.format ? (u, v) => (v === null || v === undefined ? '—' : s.format(v)) : undefined,
          stroke: COLORS[i % COLORS.length],
          width: 2,
          fill: this.bars ? `${COLORS[i % COLORS.length]}33` : undefined,
          // bars for one series; several: a step per bucket (a day's value holds for the day, never a ramp)
          paths: this.bars ? uPlot.paths.bars({ size: [0.8, 40] }) : uPlot.paths.stepped({ align: 1 }),
        })),
      ],
      axes: [
        // ticks at whole buckets: days on a daily chart, never hours
        { stroke: ink, grid: { stroke: grid }, ticks: { stroke: grid }, ...(this.step === 'day' ? { incrs: [86400, 2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400], values: (u, splits) => splits.map(utcDay) } : {}) },
        ...units.map((unit, i) => ({ scale: `y:${unit}`, stroke: ink, size: 64, side: i === 0 ? 3 : 1, label: unit || undefined, labelSize: unit ? 18 : 0, grid: { show: i === 0, stroke: grid }, ticks: { stroke: grid }, values: tickValues })),
      ],
      scales: {
        // a bucket's bar is centred on its start: half a bucket of room at either end, so the first and the
        // current one are drawn whole
        x: { time: true, range: (u, min, max) => [min - stepSeconds / 2, max + stepSeconds / 2] },
        // amounts from 0 (a bar's height is its value: an axis starting elsewhere makes small differences look
        // large); percentages 0–100
        ...Object.fromEntries(units.map((unit) => [`y:${unit}`, { auto: true, range: (u, min, max) => fromZero(min, max, unit === '%') }])),
      },
      legend: { live: true },
    };
    if (this.step === 'day') opts.tzDate = (t) => uPlot.tzDate(new Date(t * 1000), 'Etc/UTC'); // UTC days on the axis
    this.plot = new uPlot(opts, data, host);
    this.width = width;
    if (this.observed !== host) {
      // follow the width only: the hover legend's text changes the height, and a resize in the observer's own
      // frame would loop (the browser reports "ResizeObserver loop completed with undelivered notifications")
      if (this.resize) this.resize.disconnect();
      this.observed = host;
      this.resize = new ResizeObserver(() => {
        const w = Math.max(260, host.clientWidth);
        if (w === this.width) return;
        this.width = w;
        requestAnimationFrame(() => this.plot && this.plot.setSize({ width: w, height: 220 }));
      });
      this.resize.observe(host);
    }
  }

  /** A point's time as text: the hour in the user's time zone with its UTC hour, or the UTC day. */
  when(t) {
    return this.step === 'day' ? utcDay(t) : `${hourLocal.format(new Date(t * 1000))} (${utcHour(t)} UTC)`;
  }

  render() {
    const rows = this.points.filter((p) => this.series.some((s) => p[s.key]));
    const caption = html`<figcaption>${this.title}${this.note === nothing ? nothing : html` <span class="chart-note">${this.note}</span>`}</figcaption>`;
    if (!this.series.length) {
      return html`<figure class="chart">${caption}<p class="empty">${this.empty}</p></figure>`;
    }
    const unit = `${this.step === 'day' ? 'day' : 'hour'}${rows.length === 1 ? '' : 's'}`;
    const cell = (s, p) => (p[s.key] === null || p[s.key] === undefined ? '—' : s.format ? s.format(p[s.key]) : p[s.key]);
    return html`<figure class="chart">
      ${caption}
      <div class="chart-canvas" aria-hidden="true"></div>
      <details>
        <summary>${this.title}: data (${rows.length} ${unit} with values)</summary>
        ${rows.length
          ? html`<table>
              <thead><tr><th scope="col">${this.step === 'day' ? 'Day (UTC)' : 'Hour'}</th>${this.series.map((s) => html`<th scope="col">${s.label}${s.unit ? ` (${s.unit})` : nothing}</th>`)}</tr></thead>
              <tbody>${rows.map((p) => html`<tr><td>${this.step === 'day' ? utcDay(p.t) : time(new Date(p.t * 1000).toISOString(), true)}</td>${this.series.map((s) => html`<td>${cell(s, p)}</td>`)}</tr>`)}</tbody>
            </table>`
          : html`<p class="muted">Nothing in this period.</p>`}
      </details>
    </figure>`;
  }
}
customElements.define('itl-chart', Chart);

/** A value axis's [min, max]: from 0 (or the lowest value, when below 0) to a round number above the highest;
 *  0–100 for a percentage. */
export function fromZero(min, max, percent = false) {
  const lo = Math.min(0, min ?? 0);
  const hi = Math.max(max ?? 0, lo);
  if (percent) return [lo, Math.max(100, hi)];
  if (hi === lo) return [lo, lo + 1];
  return [lo, uPlot.rangeNum(lo, hi, 0.1, true)[1]];
}

/** A value axis's tick labels with as many decimals as the step between ticks needs (uPlot's own round 0.0004 to
 *  "0": an axis of small amounts read 0, 0, 0, 0.001). */
function tickValues(u, splits) {
  const decimalsOf = (v) => {
    const [digits, exponent] = String(Number(Number(v).toPrecision(10))).split('e');
    const places = (digits.split('.')[1] || '').length - Number(exponent || 0);
    return Math.max(0, places);
  };
  const decimals = Math.min(12, Math.max(0, ...splits.filter((v) => v !== null && v !== undefined).map(decimalsOf)));
  return splits.map((v) => (v === null || v === undefined ? '' : v.toLocaleString(undefined, { minimumFractionDigits: decimals, maximumFractionDigits: decimals })));
}

/** Hours a chart draws one by one; beyond, a bar per UTC day (a month of hours would be 720 bars a pixel wide, and
 *  a few hours of use a sliver at the end). */
export const HOURLY_UP_TO = 72;

/** Keys of stats points that add up over hours (the others are means: utilisation and allocation). */
const SUMMED = ['gpuSeconds', 'billableGpuSeconds', 'gpuHours', 'energyWh', 'requests', 'tokensIn', 'tokensOut'];

/** Stats of `hours` as a chart draws them: {step, points, note}. Up to HOURLY_UP_TO hours one point per hour;
 *  beyond, one per UTC day — amounts and counts added up, allocation the mean of the day's hours, utilisation
 *  weighted by the device-seconds of each hour — with a note saying so. */
export function fitStats(stats) {
  const hourly = statsPoints(stats);
  if ((stats.hours || hourly.length) <= HOURLY_UP_TO) return { step: 'hour', points: hourly, per: 'hour', note: nothing };
  const days = new Map();
  for (const p of hourly) {
    const t = Math.floor(p.t / 86400) * 86400;
    const d = days.get(t) || { t, hours: 0, weight: 0, utilisation: 0, allocated: 0, allocatedHours: 0 };
    d.hours += 1;
    for (const [k, v] of Object.entries(p)) {
      if ((SUMMED.includes(k) || k.startsWith('cost_')) && typeof v === 'number') d[k] = (d[k] || 0) + v;
    }
    if (typeof p.allocatedPercent === 'number') {
      d.allocated += p.allocatedPercent;
      d.allocatedHours += 1;
    }
    if (typeof p.gpuUtilizationPercent === 'number') {
      const w = p.gpuSeconds || 0;
      d.utilisation += p.gpuUtilizationPercent * w;
      d.weight += w;
    }
    days.set(t, d);
  }
  const points = [...days.values()].map(({ hours, weight, utilisation, allocated, allocatedHours, ...d }) => ({
    ...d,
    ...(allocatedHours ? { allocatedPercent: Math.round((allocated / allocatedHours) * 100) / 100 } : {}),
    gpuUtilizationPercent: weight ? Math.round((utilisation / weight) * 100) / 100 : null,
  }));
  return {
    step: 'day',
    points,
    per: 'day (UTC)',
    note: html`<span class="small muted chart-granularity">— per UTC day: ${stats.hours} hours are more than ${HOURLY_UP_TO / 24} days, so each day's hours are added up (the first and last day in part)</span>`,
  };
}

/** Stats points of the API (UsageStats.value) as chart points: t in epoch seconds, cost per currency as numbers. */
export function statsPoints(stats) {
  return (stats.value || []).map((p) => {
    const out = { ...p, t: Date.parse(p.timeStamp) / 1000 };
    for (const c of p.cost || []) out[`cost_${c.currency}`] = Number(c.amount);
    return out;
  });
}

/** The currencies appearing in a stats body (points and totals). */
export function statsCurrencies(stats) {
  const set = new Set();
  for (const c of (stats.totals && stats.totals.cost) || []) set.add(c.currency);
  for (const p of stats.value || []) for (const c of p.cost || []) set.add(c.currency);
  return [...set];
}
