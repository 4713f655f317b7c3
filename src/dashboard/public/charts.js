// Bar charts as inline SVG (no script, no style attributes: the CSP allows neither inline), each with
// its figures in a table for screen readers and keyboard users.
import { h, table } from './ui.js';

const WIDTH = 640;
const HEIGHT = 180;
const MAX_STEP = 72;
const PAD = { top: 10, right: 10, bottom: 40, left: 56 };

function compact(value) {
  if (value >= 1e9) return `${(value / 1e9).toFixed(1)}G`;
  if (value >= 1e6) return `${(value / 1e6).toFixed(1)}M`;
  if (value >= 1e3) return `${(value / 1e3).toFixed(1)}k`;
  return String(Math.round(value * 100) / 100);
}

/** `points` are `[label, value]`. */
export function barChart(title, unit, points) {
  const max = Math.max(1, ...points.map(([, value]) => value));
  const plotWidth = WIDTH - PAD.left - PAD.right;
  const plotHeight = HEIGHT - PAD.top - PAD.bottom;
  const step = Math.min(MAX_STEP, plotWidth / Math.max(1, points.length));
  const labelEvery = Math.max(1, Math.ceil(points.length / 10));
  const bars = points.map(([label, value], index) => {
    const height = (value / max) * plotHeight;
    const x = PAD.left + index * step;
    return h(
      'g',
      {},
      h('rect', { class: 'bar', x: x + step * 0.1, y: PAD.top + plotHeight - height, width: Math.max(1, step * 0.8), height }, h('title', { text: `${label}: ${value} ${unit}` })),
      index % labelEvery === 0 ? h('text', { x: x + step / 2, y: HEIGHT - PAD.bottom + 14, 'text-anchor': 'middle', text: label.length > 12 ? `${label.slice(0, 11)}…` : label }) : null,
    );
  });
  const axis = [
    h('line', { x1: PAD.left, y1: PAD.top + plotHeight, x2: WIDTH - PAD.right, y2: PAD.top + plotHeight, stroke: '#4a4a4a' }),
    h('text', { x: PAD.left - 6, y: PAD.top + 10, 'text-anchor': 'end', text: compact(max) }),
    h('text', { x: PAD.left - 6, y: PAD.top + plotHeight, 'text-anchor': 'end', text: '0' }),
  ];
  return h(
    'figure',
    {},
    h('figcaption', { text: `${title} (${unit})` }),
    h('svg', { class: 'chart', viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-label': `${title}, bar chart; the figures are in the table below` }, axis, bars),
    h('details', {}, h('summary', { text: `${title}: figures` }), table(title, [['', ([label]) => label], [unit, ([, value]) => String(value)]], points)),
  );
}
