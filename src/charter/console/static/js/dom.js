// Building the page from data. Every server value goes in as a text node or an attribute
// set through the DOM, never as HTML: process data, inputs and errors are untrusted.

/** An element: h("a", {href: "/x", class: "c"}, "text", otherNode, [more]). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttributes(el, attrs);
  el.append(...flatten(children));
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** An SVG element, attributes set one by one. */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttributes(el, attrs);
  el.append(...flatten(children));
  return el;
}

function setAttributes(el, attrs) {
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "on") {
      for (const [event, handler] of Object.entries(value)) el.addEventListener(event, handler);
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
}

function flatten(children) {
  const out = [];
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    out.push(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return out;
}

/** A link to a console page; the router turns clicks into client navigation. */
export function link(path, ...children) {
  return h("a", { href: "/console/" + path.replace(/^\//, "") }, ...children);
}

/** The console path of a process, a workflow or a run (ids are URL-encoded). */
export const paths = {
  process: (id) => "processes/" + encodeURIComponent(id),
  workflow: (path) => "workflows/" + path.split("/").map(encodeURIComponent).join("/"),
  run: (id) => "runs/" + encodeURIComponent(id),
};

/** A JSON value shown as indented text. */
export function json(value) {
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

/** Process data as `json` shows it, with each `{"erased": true}` (the marker
 * `charter:erase` leaves where a personal value, or what was built from one, was) shown
 * as an "erased" tag instead: a reader sees a field erased, not an odd object. */
export function data(value) {
  return h("pre", { class: "json" }, jsonWithErased(value, ""));
}

function isErased(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value)
    && Object.keys(value).length === 1 && value.erased === true;
}

// The text of JSON.stringify(value, null, 2), built piece by piece so a marker can be a node.
function jsonWithErased(value, indent) {
  if (isErased(value)) return h("span", { class: "tag erased", title: "erased by a charter:erase event" }, "erased");
  const inner = indent + "  ";
  if (Array.isArray(value) && value.length) {
    return ["[\n", value.map((v, i) => [i ? ",\n" : "", inner, jsonWithErased(v, inner)]), "\n" + indent + "]"];
  }
  if (value !== null && typeof value === "object" && Object.keys(value).length) {
    const members = Object.entries(value).map(([k, v], i) => [i ? ",\n" : "", inner, JSON.stringify(k) + ": ", jsonWithErased(v, inner)]);
    return ["{\n", members, "\n" + indent + "}"];
  }
  return JSON.stringify(value);
}

/** A table: columns [{title, cell(row) -> node|string}], rows. */
export function table(columns, rows, { empty = "Nothing to show." } = {}) {
  if (rows.length === 0) return h("p", { class: "muted" }, empty);
  return h(
    "table",
    {},
    h("thead", {}, h("tr", {}, columns.map((c) => h("th", {}, c.title)))),
    h("tbody", {}, rows.map((row) => h("tr", {}, columns.map((c) => h("td", {}, c.cell(row)))))),
  );
}

/** A definition list of [term, value] pairs (values may be nodes). */
export function facts(pairs) {
  return h(
    "dl",
    { class: "facts" },
    pairs.filter(([, v]) => v !== undefined).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v ?? "—")]),
  );
}
