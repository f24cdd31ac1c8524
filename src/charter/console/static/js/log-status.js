// A process's place in the transparency log: "logged up to seq N in the checkpoint of
// size S", or "not logged yet". The card shows only when this API has a log and the
// token may read it (`log:read`): 404 log_not_configured or 403 removes it.

import { ApiError, get, request } from "./api.js";
import { h } from "./dom.js";
import { problem } from "./sections.js";

// How many events back to look for the newest logged one (one proof request each).
const LOOK_BACK = 5;

export function logSection() {
  const body = h("div", { class: "body" }, h("p", { class: "muted" }, "Loading…"));
  const card = h("section", { class: "card", id: "log-status" }, h("h2", {}, "Transparency log"), body);
  let gone = false;

  async function show(events) {
    if (gone) return;
    try {
      const status = await get("/v1/log/status");
      body.replaceChildren(...render(status, events.length, await newestLogged(events)));
    } catch (error) {
      if (error instanceof ApiError && (error.status === 403 || error.code === "log_not_configured")) {
        gone = true; // no log here, or the token may not read it: nothing to show
        card.remove();
        return;
      }
      body.replaceChildren(problem(error));
    }
  }
  return { card, show };
}

/** The newest of the last few events with a proof in the published log, or null. */
async function newestLogged(events) {
  for (const event of events.slice(-LOOK_BACK).reverse()) {
    try {
      const text = await (await request("/v1/log/proof/" + event.hash)).text();
      return { seq: event.seq, ...parseProof(text) };
    } catch (error) {
      if (!(error instanceof ApiError && error.code === "not_logged")) throw error;
    }
  }
  return null;
}

/** The index and the checkpoint's size from a c2sp.org/tlog-proof@v1 text. */
function parseProof(text) {
  const [head, checkpoint = ""] = text.split("\n\n");
  const index = /^index (\d+)$/m.exec(head)?.[1];
  const size = checkpoint.split("\n")[1];
  return { index: Number(index), size: Number(size) };
}

function render(status, count, logged) {
  const lines = [];
  if (logged) {
    lines.push(h("p", { id: "log-logged" },
      `Logged up to seq ${logged.seq} (leaf ${logged.index}) in the checkpoint of size ${logged.size}.`));
    if (count > logged.seq) lines.push(h("p", { class: "muted" }, `${count - logged.seq} newer event(s) not logged yet.`));
  } else {
    lines.push(h("p", { id: "log-logged" }, count ? "Not logged yet." : "No events."));
  }
  const witnesses = status.cosignatures === 1 ? "1 witness cosignature" : `${status.cosignatures} witness cosignatures`;
  lines.push(h("p", { class: "muted" }, `Log ${status.origin ?? "?"}: size ${status.size}, ${witnesses}, ${status.pending} event(s) queued.`));
  const witnessing = status.witnessing;
  if (witnessing?.warning) {
    // No witness, or only one on this host: say what that cannot catch.
    lines.push(h("p", { class: "error", id: "log-witnessing" }, `Witnessing: ${witnessing.warning}.`));
  } else if (witnessing) {
    lines.push(h("p", { class: "muted", id: "log-witnessing" }, `Witnessed by ${witnessing.witnesses.join(", ")}.`));
  }
  if (status.halted) lines.push(h("p", { class: "error", id: "log-halted" }, `The sequencer halted: ${status.halted}.`));
  return lines;
}
