// The timeline picture: one ECharts scatter chart per workspace. Time runs left to right; each
// snapshot type has a lane, an agent's tool calls one more (coloured by turn), restores one
// more; sessions of `ctrlz run` are shaded bands.
//
// Built for long histories (tested with thousands of snapshots): the snapshots come from
// GET …/timeline as compact rows, each point's data is [time, lane, row index] with no object
// per point, sizes and tooltips are computed from the row only when drawn or hovered, dots
// shrink as the picture gets crowded, the canvas draws progressively, and the selection is a
// one-point series of its own so selecting never redraws the rest.

import { TYPE_COLORS, size } from "./util.js";

const LANES = ["agent", "restores", "safety", "tool", "idle", "build", "git", "auto", "post-run", "pre-run", "manual"];
// a lane with this many snapshots or more is drawn in ECharts' large mode
const LARGE = 400;
const TURN_COLORS = ["#f08c00", "#1c7ed6", "#37b24d", "#ae3ec9", "#f03e3e", "#0ca678", "#e8590c", "#4263eb"];
// the columns of a timeline row (GET …/timeline's `columns`)
export const COL = { id: 0, time: 1, type: 2, label: 3, pinned: 4, files: 5, bytes: 6, added: 7, created: 8, modified: 9, deleted: 10 };

/** A dot's size from the bytes a snapshot added; `crowd` (0..1) shrinks them when dense. */
function dotSize(bytes, crowd) {
  const big = 7 + 3 * Math.log10(1 + (bytes || 0) / 256);
  return Math.max(4, Math.min(24, big * (1 - 0.45 * crowd)));
}

export function laneOf(type) { return LANES.includes(type) ? type : "manual"; }

export class Timeline {
  constructor(node, onPick) {
    this.node = node;
    this.onPick = onPick;
    this.chart = null;
    this.rows = [];
    this.selected = null;
  }

  ensure() {
    if (this.chart || !window.echarts) return this.chart;
    this.chart = window.echarts.init(this.node, null, { renderer: "canvas" });
    this.chart.on("click", (p) => {
      const id = this.idOf(p);
      if (id) this.onPick(id);
    });
    window.addEventListener("resize", () => this.chart && this.chart.resize());
    return this.chart;
  }

  /** The snapshot id behind a clicked or hovered item, if any. */
  idOf(p) {
    if (p.data && p.data.snap) return p.data.snap;
    if (p.seriesId && /^(lane|pinned):/.test(p.seriesId) && Array.isArray(p.value)) {
      const row = this.rows[p.value[2]];
      return row ? row[COL.id] : null;
    }
    return null;
  }

  tip(p) {
    if (p.data && p.data.tip) return p.data.tip;
    const r = Array.isArray(p.value) ? this.rows[p.value[2]] : null;
    if (!r || !p.seriesId || !/^(lane|pinned):/.test(p.seriesId)) return p.seriesName;
    const when = new Date(r[COL.time]).toISOString().replace("T", " ").slice(0, 19);
    return `<b>${r[COL.id]}</b> ${escapeHtml(r[COL.type])}${r[COL.pinned] ? " · pinned" : ""}<br>${r[COL.label] ? `${escapeHtml(r[COL.label])}<br>` : ""}` +
      `${when}<br>+${r[COL.created]} ~${r[COL.modified]} -${r[COL.deleted]}, ${size(r[COL.added])} added<br>${r[COL.files]} files, ${size(r[COL.bytes])}`;
  }

  /** Draw everything: `rows` are the workspace's snapshots, oldest first (GET …/timeline). */
  render({ rows, sessions, toolCalls, operations }) {
    const chart = this.ensure();
    if (!chart) return;
    this.rows = rows;
    const byLane = {};
    rows.forEach((r, i) => {
      const lane = laneOf(r[COL.type]);
      (byLane[lane] = byLane[lane] || []).push([r[COL.time], lane, i]);
    });
    // how crowded the busiest lane is: points per 4 px of width, capped at 1
    const width = Math.max(200, this.node.clientWidth - 94);
    const busiest = Math.max(0, ...Object.values(byLane).map((d) => d.length));
    const crowd = Math.min(1, busiest / (width / 4));
    const symbol = (v) => (rows[v[2]][COL.pinned] ? "diamond" : "circle");
    const symbolSize = (v) => dotSize(rows[v[2]][COL.added], crowd) + (rows[v[2]][COL.pinned] ? 4 : 0);
    const series = [];
    for (const [lane, data] of Object.entries(byLane)) {
      const color = TYPE_COLORS[lane] || "#888";
      if (data.length < LARGE) {
        series.push({
          id: `lane:${lane}`, name: lane, type: "scatter", data, symbol, symbolSize,
          itemStyle: { color, opacity: crowd > 0.5 ? 0.75 : 0.9 }, emphasis: { scale: 1.6 },
        });
        continue;
      }
      // a crowded lane is one path of same-sized dots (ECharts' large mode: no element per
      // point), where sizes would only overlap into a band anyway; its pinned ones are drawn
      // again on top, as diamonds, so they still stand out
      series.push({
        id: `lane:${lane}`, name: lane, type: "scatter", data, large: true, largeThreshold: LARGE,
        symbol: "circle", symbolSize: dotSize(1024, crowd), itemStyle: { color, opacity: 0.75 },
      });
      const pinned = data.filter((v) => rows[v[2]][COL.pinned]);
      if (pinned.length) series.push({ id: `pinned:${lane}`, name: lane, type: "scatter", data: pinned, symbol: "diamond", symbolSize: 12, itemStyle: { color, borderColor: "#fff", borderWidth: 1 }, z: 3 });
    }
    series.push({
      id: "agent", name: "agent", type: "scatter", symbol: "rect", symbolSize: [6, 14],
      data: toolCalls.map((c) => ({
        value: [Date.parse(c.taken_at), "agent"],
        itemStyle: { color: TURN_COLORS[(c.turn || 0) % TURN_COLORS.length] },
        snap: c.workspace_snapshot || null,
        tip: `<b>turn ${c.turn}</b> ${escapeHtml(c.tool || c.kind)}<br>${escapeHtml(c.kind === "bash" ? (c.command || "") : (c.captured_paths || []).join(", ")).slice(0, 160)}<br>${c.tool_use_id}`,
      })),
    });
    series.push({
      id: "restores", name: "restores", type: "scatter", symbol: "triangle", symbolSize: 13, itemStyle: { color: "#495057" },
      data: operations.map((o) => ({
        value: [Date.parse(o.created_at), "restores"], snap: o.before,
        tip: `<b>${o.kind}</b> to ${o.target}${o.undone ? " (undone)" : ""}<br>safety snapshot ${o.before || "-"}<br>${o.status}`,
      })),
    });
    series.push({
      id: "sessions", name: "sessions", type: "scatter", data: [], silent: true,
      markArea: {
        silent: true, itemStyle: { color: "rgba(59,91,219,0.07)" }, label: { color: "#5c7cfa", fontSize: 10, position: "insideTopLeft" },
        data: sessions.filter((s) => s.started).map((s) => [
          { xAxis: Date.parse(s.started), name: (s.command || []).join(" ").slice(0, 40) || s.id },
          { xAxis: s.ended ? Date.parse(s.ended) : Date.now() },
        ]),
      },
    });
    series.push(this.selectedSeries());
    const first = rows.length ? rows[0][COL.time] : null;
    const last = rows.length ? Math.max(rows[rows.length - 1][COL.time], Date.now()) : null;
    const pad = rows.length ? Math.max(2_000, (last - first) * 0.04) : 0;
    chart.setOption({
      animation: rows.length < 500,
      grid: { left: 70, right: 24, top: 20, bottom: 62 },
      tooltip: { trigger: "item", formatter: (p) => this.tip(p), confine: true },
      xAxis: {
        type: "time", min: rows.length ? first - pad : undefined, max: rows.length ? last + pad : undefined,
        splitLine: { show: true, lineStyle: { color: "#f0f1f4" } },
      },
      yAxis: { type: "category", data: LANES, axisTick: { show: false }, splitLine: { show: true, lineStyle: { color: "#f3f4f7" } }, axisLabel: { color: "#6b7385" } },
      dataZoom: [{ type: "inside", xAxisIndex: 0, filterMode: "none" }, { type: "slider", xAxisIndex: 0, height: 22, bottom: 14, filterMode: "none" }],
      series,
    }, { notMerge: true });
  }

  selectedSeries() {
    const i = this.selected === null ? -1 : this.rows.findIndex((r) => r[COL.id] === this.selected);
    const r = i >= 0 ? this.rows[i] : null;
    return {
      id: "selected", name: "selected", type: "scatter", silent: true, z: 10, symbol: "circle", symbolSize: 16,
      itemStyle: { color: "rgba(0,0,0,0)", borderColor: "#111", borderWidth: 3 },
      data: r ? [[r[COL.time], laneOf(r[COL.type]), i]] : [],
    };
  }

  /** Ring snapshot `id`; only the one-point "selected" series is redrawn. */
  select(id) {
    this.selected = id;
    if (this.chart && this.rows.length) this.chart.setOption({ series: [this.selectedSeries()] });
  }

  resize() { if (this.chart) this.chart.resize(); }
}

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
