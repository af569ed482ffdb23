// Small helpers shared by the views: DOM building, formatting, the API client, toasts.

export const TYPE_COLORS = {
  manual: "#3b5bdb", auto: "#74c0fc", "pre-run": "#2b8a3e", "post-run": "#69db7c",
  tool: "#f08c00", safety: "#c92a2a", git: "#862e9c", build: "#0b7285", idle: "#adb5bd",
};

/** el("div.class#id", {attr: v, onclick: f}, child, "text", ...) */
export function el(spec, attrs = {}, ...children) {
  const [tagAndClasses, id] = spec.split("#");
  const [tag, ...classes] = tagAndClasses.split(".");
  const node = document.createElement(tag || "div");
  if (classes.length) node.className = classes.join(" ");
  if (id) node.id = id;
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function size(n) {
  if (n === null || n === undefined) return "-";
  const neg = n < 0; let v = Math.abs(n);
  for (const unit of ["B", "KiB", "MiB", "GiB", "TiB"]) {
    if (v < 1024 || unit === "TiB") return (neg ? "-" : "") + (unit === "B" ? `${v} B` : `${v.toFixed(1)} ${unit}`);
    v /= 1024;
  }
  return String(n);
}

export function ago(iso) {
  if (!iso) return "-";
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 5) return "just now";
  for (const [unit, len] of [["d", 86400], ["h", 3600], ["m", 60]]) if (s >= len) return `${Math.floor(s / len)}${unit} ago`;
  return `${Math.floor(s)}s ago`;
}

export function clock(iso) { return iso ? iso.slice(0, 19).replace("T", " ") : "-"; }

function csrf() {
  const m = document.cookie.match(/(?:^|;\s*)ctrlz_csrf=([^;]+)/);
  return m ? decodeURIComponent(m[1]) : "";
}

/** The API: JSON in and out; an error answer throws an Error carrying the service's message. */
export async function api(method, path, body) {
  const init = { method, credentials: "same-origin", headers: { Accept: "application/json" } };
  if (method !== "GET") {
    init.headers["X-CSRF-Token"] = csrf();
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body || {});
  }
  const response = await fetch(path, init);
  let data = null;
  try { data = await response.json(); } catch { data = null; }
  if (!response.ok) {
    const err = new Error((data && data.message) || `${response.status} ${response.statusText}`);
    err.status = response.status; err.data = data;
    throw err;
  }
  return data;
}

export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === "") continue;
    if (Array.isArray(v)) v.forEach((x) => u.append(k, x)); else u.set(k, v);
  }
  const s = u.toString();
  return s ? `?${s}` : "";
}

export function toast(message, { error = false, action = null, timeout = 8000 } = {}) {
  const box = el("div.toast" + (error ? ".error" : ""), { role: "status" }, el("div", { text: message }));
  if (action) box.append(el("div.row", {}, el("button.small", { onclick: () => { box.remove(); action.run(); } }, action.label)));
  document.getElementById("toasts").append(box);
  setTimeout(() => box.remove(), timeout);
  return box;
}

export function debounce(fn, ms) {
  let t = null;
  return (...args) => { clearTimeout(t); t = setTimeout(() => fn(...args), ms); };
}
