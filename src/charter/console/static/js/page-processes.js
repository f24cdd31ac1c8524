// /console/processes: the searchable, paginated list (GET /v1/processes, operator API).
// The filters live in the URL, so a filtered list is linkable.

import { get } from "./api.js";
import { h, link, paths, table } from "./dom.js";
import { shortHash, time } from "./format.js";
import { problem } from "./sections.js";

const FILTERS = ["workflow", "state", "q"];

export function processesPage() {
  const params = new URLSearchParams(location.search);
  const inputs = Object.fromEntries(
    FILTERS.map((name) => [name, h("input", { name, id: "filter-" + name, value: params.get(name) ?? "", placeholder: { workflow: "path or prefix", state: "state", q: "id prefix" }[name] })]),
  );
  const form = h("form", { class: "filters", id: "filters" },
    FILTERS.map((name) => h("label", {}, { workflow: "Workflow", state: "State", q: "Id" }[name], inputs[name])),
    h("button", { type: "submit" }, "Search"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const name of FILTERS) if (inputs[name].value.trim()) query.set(name, inputs[name].value.trim());
    history.pushState(null, "", "/console/processes" + (query.size ? "?" + query : ""));
    dispatchEvent(new PopStateEvent("popstate"));
  });

  const results = h("div", { id: "results" }, h("p", { class: "muted" }, "Loading…"));
  const rows = [];
  const more = h("button", { type: "button", id: "more", hidden: true }, "More");
  let cursor = null;

  async function page() {
    more.disabled = true;
    try {
      const query = Object.fromEntries(FILTERS.map((n) => [n, params.get(n) ?? ""]));
      const found = await get("/v1/processes", { query: { ...query, limit: 50, cursor } });
      rows.push(...found.items);
      cursor = found.next_cursor ?? null;
      results.replaceChildren(
        table(
          [
            { title: "Process", cell: (p) => link(paths.process(p.id), p.id) },
            { title: "Workflow", cell: (p) => link(paths.workflow(p.workflow), p.workflow) },
            { title: "State", cell: (p) => h("span", { class: "state" }, p.state) },
            { title: "Events", cell: (p) => String(p.seq) },
            { title: "Head", cell: (p) => h("code", { title: p.head }, shortHash(p.head)) },
            { title: "Updated", cell: (p) => time(p.updated_at) },
          ],
          rows,
          { empty: "No process matches." },
        ),
      );
      more.hidden = cursor === null;
    } catch (error) {
      results.replaceChildren(problem(error, "GET /v1/processes"), openById());
      more.hidden = true;
    } finally {
      more.disabled = false;
    }
  }
  more.addEventListener("click", page);
  page();

  return { title: "Processes", content: [h("h1", {}, "Processes"), form, h("section", { class: "card" }, results, more)] };
}

/** Without the list endpoint, a process can still be opened by its id. */
function openById() {
  const input = h("input", { name: "id", id: "open-id", placeholder: "process id", required: true });
  const form = h("form", { class: "filters" }, h("label", {}, "Open a process by id", input), h("button", { type: "submit" }, "Open"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    history.pushState(null, "", "/console/" + paths.process(input.value.trim()));
    dispatchEvent(new PopStateEvent("popstate"));
  });
  return form;
}
