// /console/runs/{id}: a run with its plan snapshot and step journal; Cancel for a run
// not finished, Retry for a failed one (runs:execute; a refusal is shown, not hidden).

import { get, post } from "./api.js";
import { facts, h, json, table } from "./dom.js";
import { navigate } from "./navigation.js";
import { time } from "./format.js";
import { section } from "./sections.js";

export function runPage(id) {
  const loaded = get("/v1/runs/" + encodeURIComponent(id));
  return {
    title: "Run " + id,
    content: [
      h("h1", {}, "Run ", h("code", { class: "id" }, id)),
      section("Run", async () => {
        const run = await loaded;
        return [
          actions(id, run.status),
          facts([
            ["Status", h("span", { class: "state", id: "run-status" }, run.status)],
            ["Owner", run.principal ?? "—"],
            ["Automation", h("code", {}, run.automation_id)],
            ["Trigger", run.trigger_kind + (run.trigger_id ? " " + run.trigger_id : "")],
            ["Target", run.target],
            ["Attempts", String(run.attempts)],
            ["Scheduled for", time(run.scheduled_for)],
            ["Started", time(run.started_at)],
            ["Finished", time(run.finished_at)],
            ["Retry at", time(run.retry_at)],
            ["Lease", run.lease_owner ? run.lease_owner + " until " + time(run.lease_expires_at) : "—"],
          ]),
          run.error ? [h("h3", {}, "Error"), json(run.error)] : null,
          run.output !== null && run.output !== undefined ? [h("h3", {}, "Output"), json(run.output)] : null,
          h("h3", {}, "Input"),
          json(run.input),
        ];
      }),
      section("Step journal", async () => {
        const run = await loaded;
        return table(
          [
            { title: "#", cell: (s) => String(s.position) },
            { title: "Step", cell: (s) => s.step_id },
            { title: "Status", cell: (s) => h("span", { class: "state" }, s.status) },
            { title: "Attempts", cell: (s) => String(s.attempts) },
            { title: "Idempotency key", cell: (s) => h("code", {}, s.idempotency_key) },
            { title: "Started", cell: (s) => time(s.started_at) },
            { title: "Finished", cell: (s) => time(s.finished_at) },
            { title: "Output or error", cell: (s) => json(s.error ?? s.output ?? null) },
          ],
          run.steps ?? [],
          { empty: "No step has started yet." },
        );
      }, { id: "journal" }),
      section("Plan snapshot", async () => json((await loaded).plan)),
    ],
  };
}

/** The operator actions a run in `status` allows, and where their outcome is said. */
function actions(id, status) {
  const said = h("p", { class: "error", id: "run-action-error" });
  const act = (what, label, after) => {
    const button = h("button", { type: "button", id: "run-" + what }, label);
    button.addEventListener("click", async () => {
      button.disabled = true;
      said.textContent = "";
      try {
        after(await post("/v1/runs/" + encodeURIComponent(id) + "/" + what));
      } catch (failure) {
        said.textContent = label + " refused: " + failure.code + ": " + failure.message;
        button.disabled = false;
      }
    });
    return button;
  };
  const buttons = [];
  if (status === "pending" || status === "running") {
    buttons.push(act("cancel", "Cancel run", () => navigate(location.pathname)));
  }
  if (status === "failed") {
    buttons.push(act("retry", "Retry run", (fresh) => navigate("/console/runs/" + fresh.id)));
  }
  return buttons.length ? h("div", { class: "actions" }, ...buttons, said) : null;
}
