// /console/machines: the machines that run automations (GET /v1/machines): id, target,
// principal, enabled or disabled, last seen, runs in progress. Disable and Enable appear
// only when the list says this token may use them (`can_change`, automations:write), as
// the run page offers only the actions a run allows. Run hints on the live stream (a run
// claimed, finished, released) change "runs in progress", so they re-read the list.

import { get, post } from "./api.js";
import { h, table } from "./dom.js";
import { relative, time } from "./format.js";
import * as live from "./live.js";
import { fill, section } from "./sections.js";

const POLL_MS = 10000;

export function machinesPage() {
  const card = section(null, render, { id: "machines" });
  const said = h("p", { class: "error", id: "machine-action-error", role: "alert" });
  const body = card.querySelector(".body");
  const reload = () => card.isConnected && fill(card, body, render);
  let pending = null;
  const refresh = (kind) => {
    if (kind !== "run" && kind !== "reset") return;
    pending ??= setTimeout(() => {
      pending = null; // hints come in bursts: re-read at most once a second
      reload();
    }, 1000);
  };
  const unsubscribe = live.subscribe(refresh);
  // Last seen moves without any hint; polling keeps it (and a stream-less server) current.
  const poll = setInterval(() => !document.hidden && reload(), POLL_MS);

  async function render() {
    const { items: machines, can_change: canChange } = await get("/v1/machines");
    const columns = [
      { title: "Machine", cell: (m) => h("code", { class: "id" }, m.id) },
      { title: "Target", cell: (m) => m.target },
      { title: "Principal", cell: (m) => m.principal },
      {
        title: "Status",
        cell: (m) =>
          m.disabled_at
            ? h("span", { class: "state disabled", title: time(m.disabled_at) }, "disabled")
            : h("span", { class: "state" }, "enabled"),
      },
      {
        title: "Last seen",
        cell: (m) =>
          m.last_seen_at
            ? h("span", { title: time(m.last_seen_at) }, seen(m.last_seen_at))
            : h("span", { class: "muted", title: "no request in the last few minutes" }, "not recently"),
      },
      { title: "Runs in progress", cell: (m) => String(m.runs_in_progress ?? 0) },
      { title: "Registered", cell: (m) => time(m.created_at) },
    ];
    if (canChange) {
      columns.push({ title: "", cell: (m) => toggle(m, said, reload) });
    }
    return table(columns, machines, { empty: "No machine registered." });
  }

  return {
    title: "Machines",
    content: [h("h1", {}, "Machines"), said, card],
    cleanup: () => {
      unsubscribe();
      clearInterval(poll);
      clearTimeout(pending);
    },
  };
}

/** The Disable or Enable button of one machine; the list is re-read after it acts. */
function toggle(machine, said, reload) {
  const what = machine.disabled_at ? "enable" : "disable";
  const label = machine.disabled_at ? "Enable" : "Disable";
  const button = h("button", { type: "button", class: "machine-" + what, dataset: { machine: machine.id } }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    said.textContent = "";
    try {
      await post("/v1/machines/" + encodeURIComponent(machine.id) + "/" + what);
      reload();
    } catch (failure) {
      said.textContent = label + " " + machine.id + " refused: " + failure.code + ": " + failure.message;
      button.disabled = false;
    }
  });
  return button;
}

/** How long ago; a time ahead of this browser's clock (the server's runs ahead) is now. */
function seen(value) {
  return new Date(value).getTime() > Date.now() ? "just now" : relative(value);
}
