// A time-series chart (uPlot) with its data as a table for screen readers and keyboard users.
import { html, nothing } from 'lit';
import uPlot from 'uplot';
import { View } from './ui.js';

const COLORS = ['#0b5cad', '#d9480f', '#2b8a3e', '#862e9c', '#e67700'];

/**
 * <itl-chart .title=${'...'} .points=${[{t: epochSeconds, ...}]} .series=${[{key, label, unit}]}>
 * Draws one line per series over time (x: the points' t, shown in the user's time zone).
 */
export class Chart extends View {
  static properties = { title: {}, points: { attribute: false }, series: { attribute: false }, bars: { type: Boolean } };

  constructor() {
    super();
    this.points = [];
    this.series = [];
    this.plot = null;
  }

  disconnectedCallback() {
    super.disconnectedCallback();
    if (this.plot) this.plot.destroy();
    this.plot = null;
    if (this.resize) this.resize.disconnect();
  }

  updated() {
    const host = this.querySelector('.chart-canvas');
    if (this.plot) this.plot.destroy();
    this.plot = null;
    if (!host || !this.series.length) return;
    const width = Math.max(260, host.clientWidth || 600);
    const data = [this.points.map((p) => p.t), ...this.series.map((s) => this.points.map((p) => p[s.key] ?? null))];
    const opts = {
      width,
      height: 220,
      series: [
        { label: 'Time' },
        ...this.series.map((s, i) => ({
          label: s.unit ? `${s.label} (${s.unit})` : s.label,
          stroke: COLORS[i % COLORS.length],
          width: 2,
          fill: this.bars ? `${COLORS[i % COLORS.length]}33` : undefined,
          paths: this.bars ? uPlot.paths.bars({ size: [0.8, 40] }) : undefined,
        })),
      ],
      axes: [{}, { size: 60 }],
      scales: { x: { time: true } },
      legend: { live: true },
    };
    this.plot = new uPlot(opts, data, host);
    if (!this.resize) {
      this.resize = new ResizeObserver(() => {
        if (this.plot) this.plot.setSize({ width: Math.max(260, host.clientWidth), height: 220 });
      });
      this.resize.observe(host);
    }
  }

  render() {
    const rows = this.points.filter((p) => this.series.some((s) => p[s.key]));
    if (!this.series.length) {
      return html`<figure class="chart"><figcaption>${this.title}</figcaption><p class="empty">Nothing in this period.</p></figure>`;
    }
    return html`<figure class="chart">
      <figcaption>${this.title}</figcaption>
      <div class="chart-canvas" aria-hidden="true"></div>
      <details>
        <summary>${this.title}: data (${rows.length} hours with values)</summary>
        ${rows.length
          ? html`<table>
              <thead><tr><th scope="col">Hour</th>${this.series.map((s) => html`<th scope="col">${s.label}${s.unit ? ` (${s.unit})` : nothing}</th>`)}</tr></thead>
              <tbody>${rows.map((p) => html`<tr><td>${new Date(p.t * 1000).toLocaleString()}</td>${this.series.map((s) => html`<td>${p[s.key] ?? '—'}</td>`)}</tr>`)}</tbody>
            </table>`
          : html`<p class="muted">Nothing in this period.</p>`}
      </details>
    </figure>`;
  }
}
customElements.define('itl-chart', Chart);

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
