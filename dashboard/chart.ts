/**
 * A rule's usage as a stacked bar chart in SVG, drawn by hand: one bar per
 * step, allowed at the bottom, then refused, then shadow-refused. The chart
 * says in words what it shows (its label, and the totals beside it), so that
 * it is read without seeing it.
 */

import { formatNumber } from "./dom.js";

export interface UsagePoint {
  at: string;
  allowed: number;
  refused: number;
  shadowRefused: number;
}

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 720;
const HEIGHT = 220;
const AXIS = 28;
const SERIES = [
  ["allowed", "Allowed"],
  ["refused", "Refused"],
  ["shadowRefused", "Shadow-refused"],
] as const;

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) element.setAttribute(name, String(value));
  if (text !== undefined) element.textContent = text;
  return element;
}

export function totals(points: readonly UsagePoint[]): Record<(typeof SERIES)[number][0], number> {
  const sum = { allowed: 0, refused: 0, shadowRefused: 0 };
  for (const p of points) {
    sum.allowed += p.allowed;
    sum.refused += p.refused;
    sum.shadowRefused += p.shadowRefused;
  }
  return sum;
}

export function usageChart(points: readonly UsagePoint[], title: string): SVGSVGElement {
  const sum = totals(points);
  const chart = svg("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    class: "chart",
    role: "img",
    "aria-label": `${title}: ${SERIES.map(([key, label]) => `${label.toLowerCase()} ${formatNumber(sum[key])}`).join(", ")}`,
  });
  const max = Math.max(1, ...points.map((p) => p.allowed + p.refused + p.shadowRefused));
  const plotHeight = HEIGHT - AXIS;
  const barWidth = (WIDTH - AXIS) / Math.max(1, points.length);
  chart.append(svg("line", { x1: AXIS, y1: plotHeight, x2: WIDTH, y2: plotHeight, class: "axis" }));
  chart.append(svg("text", { x: AXIS - 4, y: 12, "text-anchor": "end", class: "tick" }, formatNumber(max)));
  chart.append(svg("text", { x: AXIS - 4, y: plotHeight, "text-anchor": "end", class: "tick" }, "0"));
  points.forEach((point, i) => {
    let y = plotHeight;
    for (const [key, label] of SERIES) {
      const value = point[key];
      if (value === 0) continue;
      const height = (value / max) * (plotHeight - 4);
      y -= height;
      const bar = svg("rect", { x: AXIS + i * barWidth + 1, y, width: Math.max(1, barWidth - 2), height, class: `bar ${key}` });
      bar.append(svg("title", {}, `${new Date(point.at).toLocaleTimeString()}: ${label.toLowerCase()} ${formatNumber(value)}`));
      chart.append(bar);
    }
  });
  if (points.length > 0) {
    const time = (p: UsagePoint) => new Date(p.at).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    chart.append(svg("text", { x: AXIS, y: HEIGHT - 8, class: "tick" }, time(points[0]!)));
    chart.append(svg("text", { x: WIDTH, y: HEIGHT - 8, "text-anchor": "end", class: "tick" }, time(points.at(-1)!)));
  }
  return chart;
}

/** The legend and totals beside a chart. */
export function usageTotals(points: readonly UsagePoint[]): HTMLElement {
  const sum = totals(points);
  const list = document.createElement("dl");
  list.className = "totals";
  for (const [key, label] of SERIES) {
    const term = document.createElement("dt");
    term.innerHTML = `<span class="swatch ${key}" aria-hidden="true"></span>`;
    term.append(label);
    const value = document.createElement("dd");
    value.dataset.series = key;
    value.textContent = formatNumber(sum[key]);
    list.append(term, value);
  }
  return list;
}
