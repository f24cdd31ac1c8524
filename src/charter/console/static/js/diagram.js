// A workflow drawn as an SVG state diagram, computed in the page: states are nodes in
// layers (rows by longest path from the create actions), actions are edges labelled with
// their roles; automatic and scheduled actions are marked; given counts, each state wears
// a badge with how many processes are in it. No layout service, no library.

import { svg } from "./dom.js";

const NODE_H = 40;
const GAP = 70; // between layers, room for a two-line label
const PAD = 30;
const LEFT = 140; // room on the left for edges that go back up
const START = "\u0000start";
const ANY = "\u0000any";

/** The parsed shape of a definition: nodes and edges (pure, so it is easy to reason about). */
export function graph(definition) {
  const states = Array.isArray(definition?.states) ? definition.states.map(String) : [];
  const actions = definition?.actions && typeof definition.actions === "object" ? definition.actions : {};
  const scheduledBy = new Map(); // action name -> ["in 48h", ...]
  for (const action of Object.values(actions)) {
    for (const entry of Array.isArray(action?.schedule) ? action.schedule : []) {
      const when = entry.in ? "in " + entry.in : entry.every ? "every " + entry.every : entry.at ? "at " + entry.at : "";
      scheduledBy.set(String(entry.action), [...(scheduledBy.get(String(entry.action)) ?? []), when]);
    }
  }
  const edges = [];
  let usesAny = false;
  for (const [name, action] of Object.entries(actions)) {
    const type = action?.type ?? "transition";
    const roles = [action?.role ?? []].flat().map(String);
    const marks = { auto: Boolean(action?.auto), scheduled: scheduledBy.get(name) ?? null };
    const from = action?.from === undefined ? ["*"] : [action.from].flat().map(String);
    const base = { action: name, type, roles, ...marks };
    if (type === "create") {
      edges.push({ ...base, from: START, to: String(action.to) });
      continue;
    }
    for (const source of from) {
      const node = source === "*" ? ANY : source;
      usesAny ||= node === ANY;
      edges.push({ ...base, from: node, to: type === "update" || action?.to === undefined ? node : String(action.to) });
    }
  }
  return { states, edges, usesAny };
}

/** Per state, how many processes are in it: `{total, revisions: [[revision, n], ...]}`,
 * from the items of GET /v1/workflows/{path}/states (newest revision first, kept so). */
export function tally(items) {
  const byState = new Map();
  for (const { revision, state, processes } of items) {
    const entry = byState.get(state) ?? { total: 0, revisions: [] };
    entry.total += processes;
    entry.revisions.push([revision, processes]);
    byState.set(state, entry);
  }
  return byState;
}

const NONE = { total: 0, revisions: [] };

/** What hovering a state's badge says: its processes, by revision. */
export function countTitle(state, { total, revisions }) {
  if (total === 0) return "No process is in " + state;
  const parts = revisions.map(([revision, n]) => n + " under revision " + revision);
  return total + (total === 1 ? " process is" : " processes are") + " in " + state + ": " + parts.join(", ");
}

const badgeWidth = (total) => 7 * String(total).length + 14;

/** Layers by longest path from the start over the actions, with the edges that close a
 * cycle (found depth-first) left out; states nothing reaches go last. Rows within a
 * layer follow the mean row of each node's predecessors (one barycentre pass). */
export function layers({ states, edges, usesAny }) {
  const roots = [START, ...(usesAny ? [ANY] : [])];
  const nodes = [...roots, ...states];
  const out = new Map(nodes.map((n) => [n, []]));
  for (const e of edges) if (e.from !== e.to && out.has(e.from) && out.has(e.to)) out.get(e.from).push(e.to);
  const back = new Set();
  const done = new Set();
  const onStack = new Set();
  const order = []; // reverse post-order: a topological order of the forward edges
  const visit = (node) => {
    onStack.add(node);
    for (const next of out.get(node)) {
      if (onStack.has(next)) back.add(node + "\u0001" + next);
      else if (!done.has(next)) visit(next);
    }
    onStack.delete(node);
    done.add(node);
    order.unshift(node);
  };
  for (const root of roots) if (!done.has(root)) visit(root);
  const reached = new Set(done);
  for (const state of states) if (!done.has(state)) visit(state);
  const layer = new Map(nodes.map((n) => [n, 0]));
  for (const node of order) {
    for (const next of out.get(node)) {
      if (!back.has(node + "\u0001" + next)) layer.set(next, Math.max(layer.get(next), layer.get(node) + 1));
    }
  }
  const deepest = Math.max(0, ...[...reached].map((n) => layer.get(n)));
  for (const state of states) if (!reached.has(state)) layer.set(state, deepest + 1 + layer.get(state));
  const columns = [];
  for (const node of nodes) (columns[layer.get(node)] ??= []).push(node);
  for (let c = 0; c < columns.length; c++) columns[c] ??= [];
  const row = new Map();
  columns.forEach((column, c) => {
    if (c > 0) {
      const weight = (node) => {
        const rows = edges.filter((e) => e.to === node && e.from !== node && row.has(e.from)).map((e) => row.get(e.from));
        return rows.length ? rows.reduce((a, b) => a + b, 0) / rows.length : Infinity;
      };
      column.sort((a, b) => weight(a) - weight(b));
    }
    column.forEach((node, r) => row.set(node, r));
  });
  return { layer, row, columns };
}

/** The diagram of `definition` as an <svg> element: layers run top to bottom (most
 * workflows are long chains with few branches, which fit a page's width this way).
 * `counts` (a `tally`) puts a badge on each state: how many processes are in it. */
export function diagram(definition, { counts = null } = {}) {
  const shape = graph(definition);
  const { layer, row, columns } = layers(shape);
  const label = (node) => (node === START ? "" : node === ANY ? "any state" : node);
  const countOf = (node) => (counts && node !== START && node !== ANY ? counts.get(node) ?? NONE : null);
  const badge = (node) => (countOf(node) ? badgeWidth(countOf(node).total) + 6 : 0);
  const nodeWidth = (node) =>
    node === START ? 16 : Math.max(100, 8 * label(node).length + 28) + badge(node);
  // Nodes of a layer sit side by side, with room on their right for edge labels.
  const widest = Math.max(100, ...[...layer.keys()].map(nodeWidth));
  const labels = Math.max(120, ...shape.edges.map(labelWidth));
  const slot = widest + labels + 30;
  const box = new Map();
  for (const [node, c] of layer) {
    const w = nodeWidth(node);
    const x = LEFT + row.get(node) * slot + (widest - w) / 2;
    const y = PAD + c * (NODE_H + GAP);
    box.set(node, { x, y, w, h: node === START ? 16 : NODE_H, label: label(node), layer: c });
  }
  const across = Math.max(1, ...columns.map((c) => c.length));
  const width = LEFT + across * slot;
  const height = PAD * 2 + columns.length * (NODE_H + GAP) - GAP;

  const root = svg("svg", {
    xmlns: "http://www.w3.org/2000/svg", class: "diagram", id: "diagram", role: "img",
    viewBox: `0 0 ${width} ${height}`, width, height,
    "aria-label": "State diagram: " + shape.states.length + " states, " + shape.edges.length + " actions",
  });
  root.append(
    svg("defs", {},
      svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, orient: "auto-start-reverse" },
        svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }))),
  );

  // Edges first, so nodes are drawn over them; parallel edges fan out.
  const seen = new Map();
  const pairs = new Map();
  for (const e of shape.edges) pairs.set(e.from + "\u0001" + e.to, (pairs.get(e.from + "\u0001" + e.to) ?? 0) + 1);
  // An action with several `from` states is labelled once, on its shortest edge; its
  // other edges carry the name as a tooltip only (labels at one target would overlap).
  const labelled = new Map();
  for (const e of shape.edges) {
    const key = e.action + "\u0001" + e.to;
    const span = (edge) => Math.abs(layer.get(edge.to) - layer.get(edge.from));
    if (!labelled.has(key) || span(e) < span(labelled.get(key))) labelled.set(key, e);
  }
  const loops = new Map();
  const edgeLayer = svg("g", { class: "edges" });
  for (const edge of shape.edges) {
    const key = edge.from + "\u0001" + edge.to;
    const index = seen.get(key) ?? 0;
    seen.set(key, index + 1);
    const spread = (index - ((pairs.get(key) ?? 1) - 1) / 2) * 40;
    const loop = edge.from === edge.to ? (loops.get(edge.from) ?? 0) : 0;
    if (edge.from === edge.to) loops.set(edge.from, loop + 1);
    const named = labelled.get(edge.action + "\u0001" + edge.to) === edge;
    edgeLayer.append(drawEdge(edge, box.get(edge.from), box.get(edge.to), spread, loop, named));
  }
  root.append(edgeLayer);

  for (const [node, b] of box) {
    if (node === START) {
      root.append(svg("g", { class: "start" }, svg("circle", { cx: b.x + b.w / 2, cy: b.y + 8, r: 8 }),
        svg("title", {}, "start (create actions)")));
      continue;
    }
    const group = svg("g", {
      class: node === ANY ? "any" : "state", "data-state": node === ANY ? "*" : node,
    });
    // The name is centred in what the badge (on the right, inside the box) leaves.
    const named = b.w - badge(node);
    group.append(
      svg("rect", { x: b.x, y: b.y, width: b.w, height: b.h, rx: 8 }),
      svg("text", { x: b.x + named / 2, y: b.y + b.h / 2 + 5, "text-anchor": "middle" }, b.label),
    );
    const count = countOf(node);
    if (count) {
      const w = badgeWidth(count.total);
      const x = b.x + b.w - w - 6;
      const y = b.y + (b.h - 18) / 2;
      group.append(
        svg("g", { class: count.total ? "count" : "count none", "data-count": count.total },
          svg("rect", { x, y, width: w, height: 18, rx: 9 }),
          svg("text", { x: x + w / 2, y: y + 13, "text-anchor": "middle" }, String(count.total))),
        svg("title", {}, countTitle(node, count)),
      );
    }
    root.append(group);
  }
  return root;
}

function drawEdge(edge, from, to, spread, loop, named) {
  let d;
  let at;
  let anchor = "start";
  if (from === to) {
    // A self-loop on the node's right (update actions), stacked when there are several.
    const x = from.x + from.w;
    const y = from.y + from.h / 2;
    const reach = 30 + loop * 22;
    d = `M${x},${y - 10} C${x + reach},${y - 22} ${x + reach},${y + 22} ${x},${y + 10}`;
    at = { x: x + reach * 0.75 + 6, y: y - 6 + loop * 30 };
  } else if (to.layer > from.layer) {
    const a = { x: from.x + from.w / 2, y: from.y + from.h };
    const b = { x: to.x + to.w / 2, y: to.y };
    const dy = (b.y - a.y) / 2;
    // An edge that skips layers bows sideways, clear of the nodes it passes.
    const bow = (to.layer - from.layer - 1) * 60 + spread;
    const c1 = { x: a.x + bow, y: a.y + dy };
    const c2 = { x: b.x + bow, y: b.y - dy };
    d = `M${a.x},${a.y} C${c1.x},${c1.y} ${c2.x},${c2.y} ${b.x},${b.y}`;
    // The label sits in the gap just above the target, beside the curve.
    at = bezierAtY(a, c1, c2, b, b.y - GAP / 2 - 8);
    at.x += 8;
  } else {
    // Back or same-layer edges arc out to the left of both nodes.
    const a = { x: from.x, y: from.y + from.h / 2 };
    const b = { x: to.x, y: to.y + to.h / 2 };
    const out = 40 + Math.abs(spread) + Math.abs(a.y - b.y) / 6;
    const c1 = { x: Math.min(a.x, b.x) - out, y: a.y };
    const c2 = { x: Math.min(a.x, b.x) - out, y: b.y };
    d = `M${a.x},${a.y} C${c1.x},${c1.y} ${c2.x},${c2.y} ${b.x},${b.y}`;
    at = bezierPoint(a, c1, c2, b, 0.5);
    at.x -= 6;
    anchor = "end";
  }
  const classes = ["edge", edge.type, edge.auto ? "auto" : "", edge.scheduled ? "scheduled" : ""].filter(Boolean).join(" ");
  return svg("g", { class: classes, "data-action": edge.action },
    svg("path", { d, "marker-end": "url(#arrow)" }),
    named
      ? svg("text", { x: at.x, y: at.y, "text-anchor": anchor, class: "label" },
          svg("tspan", { class: "name" }, edge.action),
          svg("tspan", { x: at.x, dy: 14, class: "roles" }, rolesLine(edge)))
      : null,
    svg("title", {}, edge.action + " (" + edge.type + ") by " + (edge.roles.join(", ") || "no role")),
  );
}

function bezierPoint(p0, p1, p2, p3, t) {
  const u = 1 - t;
  return {
    x: u * u * u * p0.x + 3 * u * u * t * p1.x + 3 * u * t * t * p2.x + t * t * t * p3.x,
    y: u * u * u * p0.y + 3 * u * u * t * p1.y + 3 * u * t * t * p2.y + t * t * t * p3.y,
  };
}

/** The point of a top-to-bottom curve at height `y` (bisection: y grows with t). */
function bezierAtY(p0, p1, p2, p3, y) {
  let low = 0;
  let high = 1;
  for (let i = 0; i < 30; i++) {
    const t = (low + high) / 2;
    if (bezierPoint(p0, p1, p2, p3, t).y < y) low = t;
    else high = t;
  }
  return bezierPoint(p0, p1, p2, p3, (low + high) / 2);
}

function marks(edge) {
  return [edge.auto ? "auto" : null, edge.scheduled ? "timer " + edge.scheduled.join(", ") : null].filter(Boolean);
}

function rolesLine(edge) {
  const extra = marks(edge);
  return edge.roles.join(" | ") + (extra.length ? " · " + extra.join(" · ") : "");
}

/** A label's width in the diagram's 12px font, roughly (no layout pass needed). */
function labelWidth(edge) {
  return Math.max(7.2 * edge.action.length, 6.2 * rolesLine(edge).length);
}
