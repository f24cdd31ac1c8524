// /console/: the overview from GET /v1/stats (operator API): processes by workflow and
// state, timers due soon, failures needing attention, runs and machines; kept live.

import { get } from "./api.js";
import { facts, h, link, paths, table } from "./dom.js";
import { time } from "./format.js";
import * as live from "./live.js";
import { fill, section } from "./sections.js";

const POLL_MS = 10000;

export function overviewPage() {
  const card = section("Now", render, { needs: "GET /v1/stats", id: "stats" });
  const body = card.querySelector(".body");
  let pending = null;
  const refresh = () => {
    // Hints can come in bursts: re-read the stats at most once a second.
    pending ??= setTimeout(() => {
      pending = null;
      if (card.isConnected) fill(card, body, render, "GET /v1/stats");
    }, 1000);
  };
  const unsubscribe = live.subscribe(refresh);
  const poll = setInterval(() => live.isPolling() && !document.hidden && refresh(), POLL_MS);
  return {
    title: "Overview",
    content: [h("h1", {}, "Overview"), card],
    cleanup: () => {
      unsubscribe();
      clearInterval(poll);
      clearTimeout(pending);
    },
  };
}

async function render() {
  const stats = await get("/v1/stats");
  const byWorkflow = new Map();
  for (const row of stats.processes ?? []) {
    const states = byWorkflow.get(row.workflow) ?? [];
    states.push(row);
    byWorkflow.set(row.workflow, states);
  }
  const counts = (object) =>
    Object.entries(object ?? {}).map(([k, v]) => k + ": " + v).join(", ") || "none";
  return [
    facts([
      ["Timers due in the next hour", String(stats.timers_due_next_hour ?? 0)],
      ["Automation queue", counts(stats.queue)],
      ["Failed work rows", h("span", { class: stats.failed_work ? "error" : "" }, String(stats.failed_work ?? 0))],
      ["Runs", [counts(stats.runs), " · ", link("automations", "automations and runs")]],
      ["Machines seen recently", String(stats.machines_seen_recently ?? 0)],
      ["As of", time(stats.as_of)],
    ]),
    h("h3", {}, "Processes by workflow and state"),
    table(
      [
        { title: "Workflow", cell: ([w]) => link(paths.workflow(w), w) },
        {
          title: "States",
          cell: ([w, rows]) =>
            h("ul", { class: "inline" }, rows.map((r) =>
              h("li", {}, link("processes?workflow=" + encodeURIComponent(w) + "&state=" + encodeURIComponent(r.state), r.state + " " + r.count)))),
        },
        { title: "Total", cell: ([, rows]) => String(rows.reduce((n, r) => n + Number(r.count), 0)) },
      ],
      [...byWorkflow.entries()],
      { empty: "No processes yet." },
    ),
  ];
}
