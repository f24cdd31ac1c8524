// /console/automations: automations and their triggers, runs, machines, and the
// global views of timers and the automation queue (operator API).

import { get } from "./api.js";
import { h, json, link, paths, table } from "./dom.js";
import { relative, shortHash, time } from "./format.js";
import { fill, section } from "./sections.js";

export function automationsPage() {
  return {
    title: "Automations",
    content: [
      h("h1", {}, "Automations"),
      section("Automations", async () => {
        const { items } = await get("/v1/automations", { query: { limit: 200 } });
        return table(
          [
            { title: "Name", cell: (a) => a.name },
            { title: "Owner", cell: (a) => a.principal ?? "—" },
            { title: "Target", cell: (a) => a.target },
            { title: "Enabled", cell: (a) => (a.enabled ? "yes" : "paused") },
            { title: "Created", cell: (a) => time(a.created_at) },
            { title: "Triggers and plan", cell: (a) => details(a.id) },
          ],
          items,
          { empty: "No automation yet." },
        );
      }, { id: "automations" }),
      section("Runs", async () => {
        const { items } = await get("/v1/runs", { query: { limit: 100 } });
        return table(
          [
            { title: "Run", cell: (r) => link(paths.run(r.id), shortHash(r.id)) },
            { title: "Status", cell: (r) => h("span", { class: "state" }, r.status) },
            { title: "Owner", cell: (r) => r.principal ?? "—" },
            { title: "Trigger", cell: (r) => r.trigger_kind },
            { title: "Target", cell: (r) => r.target },
            { title: "Attempts", cell: (r) => String(r.attempts) },
            { title: "Created", cell: (r) => time(r.created_at) },
            { title: "Error", cell: (r) => (r.error === null || r.error === undefined ? "" : typeof r.error === "string" ? r.error : JSON.stringify(r.error)) },
          ],
          items,
          { empty: "No run yet." },
        );
      }, { id: "runs" }),
      section("Machines", async () => {
        const { items: machines } = await get("/v1/machines");
        return table(
          Object.keys(machines[0] ?? {}).filter((k) => !/jwk|key|token/i.test(k)).map((k) => ({
            title: k.replaceAll("_", " "),
            cell: (m) =>
              k.endsWith("_at") ? time(m[k]) : typeof m[k] === "object" && m[k] !== null ? JSON.stringify(m[k]) : String(m[k] ?? "—"),
          })),
          machines,
          { empty: "No machine registered." },
        );
      }, { id: "machines" }),
      section("Timers across processes", () => work("/v1/automation/scheduled", "scheduled"), {
        needs: "GET /v1/automation/scheduled", id: "global-scheduled",
      }),
      section("Automation queue across processes", () => work("/v1/automation/queue", "queue"), {
        needs: "GET /v1/automation/queue", id: "global-queue",
      }),
    ],
  };
}

function details(automationId) {
  const box = h("details", {}, h("summary", {}, "show"));
  let loaded = false;
  box.addEventListener("toggle", () => {
    if (!box.open || loaded) return;
    loaded = true;
    const body = h("div", {}, "Loading…");
    box.append(body);
    fill(box, body, async () => {
      const a = await get("/v1/automations/" + encodeURIComponent(automationId));
      return [
        table([
          { title: "Cron", cell: (s) => s.cron },
          { title: "Time zone", cell: (s) => s.timezone },
          { title: "Next", cell: (s) => time(s.next_run_at) },
          { title: "Enabled", cell: (s) => (s.enabled ? "yes" : "no") },
        ], a.schedules ?? [], { empty: "No schedule trigger." }),
        table([
          { title: "Webhook source", cell: (w) => w.source },
          { title: "Event", cell: (w) => w.event ?? "any" },
          { title: "Enabled", cell: (w) => (w.enabled ? "yes" : "no") },
        ], a.webhooks ?? [], { empty: "No webhook trigger." }),
        a.plan ? json({ steps: a.plan.steps, allowlist: a.plan.allowlist, limits: a.plan.limits }) : h("p", { class: "muted" }, "No plan."),
      ];
    });
  });
  return box;
}

/** The global timer or queue view: `GET /v1/automation/scheduled|queue` answers
 * `{"items": [rows], "next_cursor"}`, rows naming `what`, `process`, `due`. */
async function work(path, lane) {
  const body = await get(path, { query: { status: lane === "scheduled" ? "active" : "" } });
  return table(
    [
      { title: "Process", cell: (r) => link(paths.process(r.process), r.process) },
      { title: "Action", cell: (r) => r.what },
      { title: "Status", cell: (r) => r.status },
      {
        title: lane === "scheduled" ? "Due" : "Queued",
        cell: (r) => time(r.due) + " (" + relative(r.due) + ")",
      },
      { title: "Attempts", cell: (r) => String(r.attempts ?? 0) },
      { title: "Last error", cell: (r) => r.last_error ?? "" },
    ],
    body.items ?? [],
    { empty: "Nothing here." },
  );
}
