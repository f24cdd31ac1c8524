// A workflow drawn as an SVG state diagram, computed in the page: states are nodes in
// layers (columns by distance from the create actions), actions are edges labelled with
// their roles; automatic and scheduled actions are marked. No layout service, no library.

import { svg } from "./dom.js";

const COL = 270; // distance between layers
const ROW = 100; // distance between nodes of a layer
const NODE_H = 40;
const PAD = 30;
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

/** Layers by breadth-first distance from the start; unreachable states go last. */
export function layers({ states, edges, usesAny }) {
  const layer = new Map([[START, 0]]);
  if (usesAny) layer.set(ANY, 0);
  const queue = [START, ...(usesAny ? [ANY] : [])];
  while (queue.length) {
    const node = queue.shift();
    for (const edge of edges) {
      if (edge.from === node && edge.to !== node && !layer.has(edge.to)) {
        layer.set(edge.to, layer.get(node) + 1);
        queue.push(edge.to);
      }
    }
  }
  const deepest = Math.max(0, ...layer.values());
  for (const state of states) if (!layer.has(state)) layer.set(state, deepest + 1);
  const columns = [];
  for (const node of [START, ...(usesAny ? [ANY] : []), ...states]) {
    const index = layer.get(node);
    (columns[index] ??= []).push(node);
  }
  // One barycentre pass: order each layer by the mean row of its predecessors.
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

/** The diagram of `definition` as an <svg> element. */
export function diagram(definition) {
  const shape = graph(definition);
  const { layer, row, columns } = layers(shape);
  const tallest = Math.max(1, ...columns.map((c) => c.length));
  const width = PAD * 2 + (columns.length - 1) * COL + 180;
  const height = PAD * 2 + (tallest - 1) * ROW + NODE_H + 90;
  const box = new Map();
  for (const [node, c] of layer) {
    const label = node === START ? "" : node === ANY ? "any state" : node;
    const w = node === START ? 16 : Math.max(100, 8 * label.length + 28);
    const x = PAD + c * COL;
    const y = PAD + 30 + row.get(node) * ROW;
    box.set(node, { x, y, w, h: node === START ? 16 : NODE_H, label });
  }

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
  const edgeLayer = svg("g", { class: "edges" });
  for (const edge of shape.edges) {
    const key = edge.from + "\u0001" + edge.to;
    const index = seen.get(key) ?? 0;
    seen.set(key, index + 1);
    const spread = (index - ((pairs.get(key) ?? 1) - 1) / 2) * 34;
    edgeLayer.append(drawEdge(edge, box.get(edge.from), box.get(edge.to), spread, index));
  }
  root.append(edgeLayer);

  for (const [node, b] of box) {
    if (node === START) {
      root.append(svg("g", { class: "start" }, svg("circle", { cx: b.x + 8, cy: b.y + NODE_H / 2, r: 8 }),
        svg("title", {}, "start (create actions)")));
      continue;
    }
    const group = svg("g", {
      class: node === ANY ? "any" : "state", "data-state": node === ANY ? "*" : node,
    });
    group.append(
      svg("rect", { x: b.x, y: b.y, width: b.w, height: b.h, rx: 8 }),
      svg("text", { x: b.x + b.w / 2, y: b.y + b.h / 2 + 5, "text-anchor": "middle" }, b.label),
    );
    root.append(group);
  }
  return root;
}

function anchor(b, side) {
  if (b.label === "") return { x: b.x + (side === "right" ? 16 : 0), y: b.y + NODE_H / 2 };
  if (side === "right") return { x: b.x + b.w, y: b.y + b.h / 2 };
  if (side === "left") return { x: b.x, y: b.y + b.h / 2 };
  if (side === "top") return { x: b.x + b.w / 2, y: b.y };
  return { x: b.x + b.w / 2, y: b.y + b.h };
}

function drawEdge(edge, from, to, spread, index) {
  let d;
  let mid;
  if (from === to) {
    // A self-loop above the node (update actions), stacked when there are several.
    const top = anchor(from, "top");
    const lift = 34 + index * 16;
    d = `M${top.x - 14},${top.y} C${top.x - 30},${top.y - lift} ${top.x + 30},${top.y - lift} ${top.x + 14},${top.y}`;
    mid = { x: top.x, y: top.y - lift * 0.75 - 4 };
  } else if (to.x > from.x) {
    const a = anchor(from, "right");
    const b = anchor(to, "left");
    const dx = (b.x - a.x) / 2;
    const c1 = { x: a.x + dx, y: a.y + spread };
    const c2 = { x: b.x - dx, y: b.y + spread };
    d = `M${a.x},${a.y} C${c1.x},${c1.y} ${c2.x},${c2.y} ${b.x},${b.y}`;
    mid = bezierMiddle(a, c1, c2, b);
  } else {
    // Back or same-layer edges arc below both nodes.
    const a = anchor(from, "bottom");
    const b = anchor(to, "bottom");
    const drop = 50 + Math.abs(spread) + Math.abs(a.x - b.x) / 8;
    const c1 = { x: a.x, y: Math.max(a.y, b.y) + drop };
    const c2 = { x: b.x, y: Math.max(a.y, b.y) + drop };
    d = `M${a.x},${a.y} C${c1.x},${c1.y} ${c2.x},${c2.y} ${b.x},${b.y}`;
    mid = bezierMiddle(a, c1, c2, b);
  }
  const marks = [edge.auto ? "⚡ auto" : null, edge.scheduled ? "⏱ " + edge.scheduled.join(", ") : null].filter(Boolean);
  const classes = ["edge", edge.type, edge.auto ? "auto" : "", edge.scheduled ? "scheduled" : ""].filter(Boolean).join(" ");
  return svg("g", { class: classes, "data-action": edge.action },
    svg("path", { d, "marker-end": "url(#arrow)" }),
    svg("text", { x: mid.x, y: mid.y - 4, "text-anchor": "middle", class: "label" },
      svg("tspan", { class: "name" }, edge.action),
      svg("tspan", { x: mid.x, dy: 14, class: "roles" }, edge.roles.join(" | ") + (marks.length ? " · " + marks.join(" · ") : ""))),
    svg("title", {}, edge.action + " (" + edge.type + ") by " + (edge.roles.join(", ") || "no role")),
  );
}

function bezierMiddle(p0, p1, p2, p3) {
  return { x: (p0.x + 3 * p1.x + 3 * p2.x + p3.x) / 8, y: (p0.y + 3 * p1.y + 3 * p2.y + p3.y) / 8 };
}
