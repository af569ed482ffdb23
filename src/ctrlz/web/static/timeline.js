// The timeline picture: one ECharts scatter chart per workspace. Time runs left to right; each
// snapshot type has a lane, an agent's tool calls one more (coloured by turn), restores one
// more; sessions of `ctrlz run` are shaded bands. Canvas rendering and data zoom keep it fast
// with thousands of snapshots.

import { TYPE_COLORS, size } from "./util.js";

const LANES = ["agent", "restores", "safety", "tool", "idle", "build", "git", "auto", "post-run", "pre-run", "manual"];
const TURN_COLORS = ["#f08c00", "#1c7ed6", "#37b24d", "#ae3ec9", "#f03e3e", "#0ca678", "#e8590c", "#4263eb"];

function dotSize(bytes) {
  return Math.max(7, Math.min(24, 7 + 3 * Math.log10(1 + (bytes || 0) / 256)));
}

export class Timeline {
  constructor(node, onPick) {
    this.node = node;
    this.onPick = onPick;
    this.chart = null;
    this.selected = null;
  }

  ensure() {
    if (this.chart || !window.echarts) return this.chart;
    this.chart = window.echarts.init(this.node, null, { renderer: "canvas" });
    this.chart.on("click", (p) => {
      if (p.data && p.data.snap) this.onPick(p.data.snap);
    });
    window.addEventListener("resize", () => this.chart && this.chart.resize());
    return this.chart;
  }

  render({ snapshots, sessions, toolCalls, operations }) {
    const chart = this.ensure();
    if (!chart) return;
    const byType = {};
    for (const s of snapshots) {
      const lane = LANES.includes(s.type) ? s.type : "manual";
      (byType[lane] = byType[lane] || []).push({
        value: [Date.parse(s.created_at), lane], snap: s.id,
        symbol: s.pinned ? "diamond" : "circle", symbolSize: dotSize(s.added_bytes) + (s.pinned ? 4 : 0),
        itemStyle: s.id === this.selected ? { borderColor: "#111", borderWidth: 3 } : undefined,
        tip: `<b>${s.id}</b> ${s.type}${s.pinned ? " · pinned" : ""}<br>${s.label ? `${escapeHtml(s.label)}<br>` : ""}` +
          `${s.created_at.replace("T", " ").slice(0, 19)}<br>+${s.changes.created} ~${s.changes.modified} -${s.changes.deleted}, ${size(s.added_bytes)} added<br>${s.files} files, ${size(s.bytes)}`,
      });
    }
    const series = Object.entries(byType).map(([lane, data]) => ({
      name: lane, type: "scatter", data, itemStyle: { color: TYPE_COLORS[lane] || "#888", opacity: 0.9 },
      emphasis: { scale: 1.4 }, progressive: 2000,
    }));
    series.push({
      name: "agent", type: "scatter", symbol: "rect", symbolSize: [6, 14],
      data: toolCalls.map((c) => ({
        value: [Date.parse(c.taken_at), "agent"],
        itemStyle: { color: TURN_COLORS[(c.turn || 0) % TURN_COLORS.length] },
        snap: c.workspace_snapshot || null,
        tip: `<b>turn ${c.turn}</b> ${escapeHtml(c.tool || c.kind)}<br>${escapeHtml(c.kind === "bash" ? (c.command || "") : (c.captured_paths || []).join(", ")).slice(0, 160)}<br>${c.tool_use_id}`,
      })),
    });
    series.push({
      name: "restores", type: "scatter", symbol: "triangle", symbolSize: 13, itemStyle: { color: "#495057" },
      data: operations.map((o) => ({
        value: [Date.parse(o.created_at), "restores"], snap: o.before,
        tip: `<b>${o.kind}</b> to ${o.target}${o.undone ? " (undone)" : ""}<br>safety snapshot ${o.before || "-"}<br>${o.status}`,
      })),
    });
    series.push({
      name: "sessions", type: "scatter", data: [], silent: true,
      markArea: {
        silent: true, itemStyle: { color: "rgba(59,91,219,0.07)" }, label: { color: "#5c7cfa", fontSize: 10, position: "insideTopLeft" },
        data: sessions.filter((s) => s.started).map((s) => [
          { xAxis: Date.parse(s.started), name: (s.command || []).join(" ").slice(0, 40) || s.id },
          { xAxis: s.ended ? Date.parse(s.ended) : Date.now() },
        ]),
      },
    });
    const times = snapshots.map((s) => Date.parse(s.created_at));
    const span = times.length ? Math.max(...times, Date.now()) - Math.min(...times) : 0;
    const pad = Math.max(2_000, span * 0.04);
    chart.setOption({
      animation: snapshots.length < 500,
      grid: { left: 70, right: 24, top: 20, bottom: 62 },
      tooltip: { trigger: "item", formatter: (p) => (p.data && p.data.tip) || p.seriesName, confine: true },
      xAxis: {
        type: "time", min: times.length ? Math.min(...times) - pad : undefined, max: times.length ? Math.max(...times, Date.now()) + pad : undefined,
        splitLine: { show: true, lineStyle: { color: "#f0f1f4" } },
      },
      yAxis: { type: "category", data: LANES, axisTick: { show: false }, splitLine: { show: true, lineStyle: { color: "#f3f4f7" } }, axisLabel: { color: "#6b7385" } },
      dataZoom: [{ type: "inside", xAxisIndex: 0, filterMode: "none" }, { type: "slider", xAxisIndex: 0, height: 22, bottom: 14, filterMode: "none" }],
      series,
    }, { notMerge: true });
  }

  select(id) { this.selected = id; }

  resize() { if (this.chart) this.chart.resize(); }
}

function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
