// /console/workflows (every deployed path) and /console/workflows/{path} (versions, the
// state diagram, the actions and the definition).

import { get } from "./api.js";
import { facts, h, json, link, paths, table } from "./dom.js";
import { diagram, tally } from "./diagram.js";
import { shortHash, time } from "./format.js";
import { problem, section } from "./sections.js";

export function workflowsPage() {
  return {
    title: "Workflows",
    content: [
      h("h1", {}, "Workflows"),
      section("Deployed workflows", async () => {
        const { items: workflows } = await get("/v1/workflows");
        return table(
          [
            { title: "Path", cell: (w) => link(paths.workflow(w.path), w.path) },
            { title: "Revision", cell: (w) => String(w.revision) },
            { title: "Version", cell: (w) => h("code", { title: w.version }, shortHash(w.version)) },
            { title: "Deployed", cell: (w) => time(w.deployed_at) },
            { title: "By", cell: (w) => w.deployed_by ?? "—" },
          ],
          workflows,
          { empty: "No workflow is deployed yet (charter workflows deploy)." },
        );
      }, { id: "workflows" }),
    ],
  };
}

export function workflowPage(path) {
  const encoded = path.split("/").map(encodeURIComponent).join("/");
  const loaded = get("/v1/workflows/" + encoded);
  // Never rejected: without its counts the diagram is still drawn, and says why not.
  const counted = get("/v1/workflows/" + encoded + "/states").then(
    ({ items }) => ({ items }),
    (error) => ({ error }),
  );
  return {
    title: "Workflow " + path,
    content: [
      h("h1", {}, "Workflow ", h("code", { class: "id" }, path)),
      h("p", {}, link("processes?workflow=" + encodeURIComponent(path), "Processes of this workflow")),
      section("State diagram", async () => {
        const workflow = await loaded;
        const { items, error } = await counted;
        const counts = items ? tally(items) : null;
        return [
          h("div", { class: "diagram-frame" }, diagram(workflow.definition, { counts })),
          h("p", { class: "legend muted" },
            "Boxes are states, arrows are actions labelled with the roles that may take them; ",
            "the dot starts create actions; violet dashed arrows (auto) fire by themselves, amber dotted ones (timer) when a schedule is due; ",
            "loops are updates that keep the state; the dashed box stands for any state",
            counts ? "; the number on a state is how many processes are in it now, under any revision (hover it for each revision's)." : "."),
          h("h3", {}, "Processes by state and revision"),
          error ? problem(error) : stateCounts(workflow.definition, items, counts),
        ];
      }, { id: "diagram-card" }),
      section("Actions", async () => {
        const { definition } = await loaded;
        const rows = Object.entries(definition.actions ?? {}).map(([name, a]) => ({ name, ...a }));
        return table(
          [
            { title: "Action", cell: (a) => a.name },
            { title: "Type", cell: (a) => a.type ?? "transition" },
            { title: "Roles", cell: (a) => [a.role ?? []].flat().join(", ") },
            { title: "From", cell: (a) => [a.from ?? "—"].flat().join(", ") },
            { title: "To", cell: (a) => a.to ?? "—" },
            { title: "When", cell: (a) => (a.when ? h("code", {}, a.when) : "") },
            { title: "Automation", cell: (a) => [a.auto ? "auto" : null, ...(a.schedule ?? []).map((s) => "schedules " + s.action + " (" + s.id + ")")].filter(Boolean).join("; ") },
          ],
          rows,
        );
      }),
      section("Revisions", async () => {
        const { revisions } = await loaded;
        return table(
          [
            { title: "Revision", cell: (r) => String(r.revision) },
            { title: "Version", cell: (r) => h("code", { title: r.version }, shortHash(r.version)) },
            { title: "Deployed", cell: (r) => time(r.deployed_at) },
            { title: "By", cell: (r) => r.deployed_by ?? "—" },
          ],
          revisions,
        );
      }),
      section("Definition", async () => {
        const workflow = await loaded;
        return [facts([["Version", h("code", {}, workflow.version)]]), json(workflow.definition)];
      }),
    ],
  };
}

/** The counts as a table: a row per state (the current definition's, then any that
 * only older revisions have), a column per revision that has processes, and totals. */
function stateCounts(definition, items, counts) {
  if (items.length === 0) return h("p", { class: "muted", id: "state-counts" }, "No process runs this workflow yet.");
  const revisions = [...new Set(items.map((i) => i.revision))]; // newest first, as answered
  const current = Array.isArray(definition.states) ? definition.states.map(String) : [];
  const states = [...current, ...[...counts.keys()].filter((s) => !current.includes(s))];
  const cell = (n) => (n ? String(n) : h("span", { class: "muted" }, "0"));
  const of = (state, revision) => items.find((i) => i.state === state && i.revision === revision)?.processes ?? 0;
  const columns = [
    {
      title: "State",
      cell: (state) => state === null
        ? h("strong", {}, "All states")
        : [h("span", { class: "state" }, state),
           current.includes(state) ? null : h("span", { class: "muted" }, " not in the current revision")],
    },
    ...revisions.map((revision) => ({
      title: "Revision " + revision,
      cell: (state) => cell(state === null
        ? items.filter((i) => i.revision === revision).reduce((a, i) => a + i.processes, 0)
        : of(state, revision)),
    })),
    {
      title: "All revisions",
      cell: (state) => h("strong", {}, String(state === null
        ? items.reduce((a, i) => a + i.processes, 0)
        : (counts.get(state)?.total ?? 0))),
    },
  ];
  const shown = table(columns, [...states, null]);
  shown.id = "state-counts";
  shown.classList.add("counts");
  shown.querySelectorAll("tbody tr").forEach((tr, i) =>
    i < states.length ? tr.setAttribute("data-state", states[i]) : tr.classList.add("total"));
  return shown;
}
