// /console/processes/{id}: state and data, the chain as a timeline (with causes of
// automated events), verification marked on each event, pending timers and queued
// automatic actions, parent and children, the export bundle, the process's place in the
// transparency log (log-status.js) and the Act section (act.js: a governed action signed
// in this browser). A v2 event shows its envelope as signed, with the digests of its
// personal fields: the page never asks for the disclosed values (`?disclosures=true`),
// whatever the token's scopes, so the chain shows no personal value as sent. After a
// `charter:erase`, the data's `{"erased": true}` markers show as "erased" tags, the erase
// event names its basis, request and scope, and Verify says which values it took.

import { get, processPath, request } from "./api.js";
import { data, facts, h, json, link, paths, table } from "./dom.js";
import { relative, shortHash, time } from "./format.js";
import * as live from "./live.js";
import { fill, problem, section } from "./sections.js";
import { actSection } from "./act.js";
import { logSection } from "./log-status.js";

const POLL_MS = 5000;
const MIGRATE = "charter:migrate"; // the built-in action of a workflow with a `migration` block
const ERASE = "charter:erase"; // and of one with an `erasure` block

export function processPage(id) {
  let shownSeq = null;
  // The last verification shown, and whether one is under way: a reload keeps a verdict
  // that still describes the chain (Verify may be clicked while the page is loading).
  let verification = null;
  let verifying = false;
  const verdict = h("p", { class: "verdict", id: "verdict", "aria-live": "polite" });
  const verifyButton = h("button", { type: "button", id: "verify" }, "Verify chain");
  const exportButton = h("button", { type: "button", id: "export" }, "Export bundle");
  const countdowns = new Set();

  const summaryBody = h("div", { class: "body" });
  const summary = h("section", { class: "card", id: "summary" }, h("h2", {}, "State and data"), summaryBody);
  const timelineBody = h("div", { class: "body" });
  const timeline = h("section", { class: "card", id: "timeline" }, h("h2", {}, "Chain"), timelineBody);
  const workBody = h("div", { class: "body" });
  const work = h("section", { class: "card", id: "automation" }, h("h2", {}, "Timers and queued actions"), workBody);
  const act = actSection(id, { onAccepted: () => load().catch(() => {}) });
  const log = logSection();

  async function load() {
    const [process, history] = await Promise.all([get(processPath(id)), get(processPath(id, "/events"))]);
    const events = history.items;
    shownSeq = process.seq;
    act.show(process);
    await Promise.all([
      fill(summary, summaryBody, () => renderSummary(process)),
      fill(timeline, timelineBody, () => renderTimeline(process, events)),
      fill(work, workBody, async () => renderWork(await get(processPath(id, "/automation")), events, countdowns)),
      log.show(events),
    ]);
    if (verification !== null && verification.events === process.seq) {
      markVerification(timeline, verdict, verification); // the new timeline, marked again
    } else if (!verifying) {
      verification = null; // the chain grew, or the verdict was an error: clear it
      verdict.replaceChildren();
    }
  }

  const content = [
    h("div", { class: "page-head" },
      h("h1", {}, "Process ", h("code", { class: "id" }, id)),
      h("div", { class: "actions" }, verifyButton, exportButton)),
    verdict,
    summary,
    log.card,
    act.card,
    timeline,
    work,
  ];

  load().catch((error) => {
    // The process itself could not be read: one message instead of three cards.
    for (const card of [summary, log.card, act.card, timeline, work]) card.remove();
    verdict.replaceChildren(problem(error));
  });

  verifyButton.addEventListener("click", async () => {
    verifyButton.disabled = true;
    verifying = true;
    verification = null;
    verdict.replaceChildren(h("span", { class: "muted" }, "Verifying…"));
    try {
      verification = await get(processPath(id, "/verify"));
      markVerification(timeline, verdict, verification);
    } catch (error) {
      verdict.replaceChildren(problem(error));
    } finally {
      verifying = false;
      verifyButton.disabled = false;
    }
  });

  exportButton.addEventListener("click", async () => {
    exportButton.disabled = true;
    try {
      const blob = await (await request(processPath(id, "/export"))).blob();
      const href = URL.createObjectURL(blob);
      const a = h("a", { href, download: id + ".charter-export.json", hidden: true });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(href), 10000);
    } catch (error) {
      verdict.replaceChildren(problem(error, "GET /v1/processes/{id}/export"));
    } finally {
      exportButton.disabled = false;
    }
  });

  // New events appear live: a hint for this process reloads; without a stream, poll the head.
  const unsubscribe = live.subscribe((kind, data) => {
    if ((kind === "event" || kind === "work") && data?.process === id) load().catch(() => {});
  });
  const poll = setInterval(async () => {
    if (!live.isPolling() || document.hidden) return;
    try {
      const process = await get(processPath(id));
      if (process.seq !== shownSeq) await load();
    } catch {
      // a failed poll changes nothing shown
    }
  }, POLL_MS);
  const ticker = setInterval(() => countdowns.forEach((tick) => tick()), 1000);

  return {
    title: "Process " + id,
    content,
    cleanup: () => {
      unsubscribe();
      clearInterval(poll);
      clearInterval(ticker);
    },
  };
}

function renderSummary(process) {
  const children = Array.isArray(process.children) ? process.children : [];
  return [
    facts([
      ["Workflow", link(paths.workflow(process.workflow), process.workflow)],
      ["State", h("span", { class: "state", id: "state" }, process.state)],
      ["Events", String(process.seq)],
      ["Head", h("code", { title: process.head }, shortHash(process.head))],
      ["Created", time(process.created_at)],
      ["Updated", time(process.updated_at)],
      ["Parent", process.parent ? link(paths.process(process.parent), process.parent) : "—"],
      ["Children", children.length ? h("ul", { class: "inline" }, children.map((c) => h("li", {}, link(paths.process(c), c)))) : "—"],
    ]),
    h("h3", {}, "Data"),
    h("div", { id: "data" }, data(process.data)),
  ];
}

function renderTimeline(process, events) {
  const bySeq = new Map();
  for (const event of events) bySeq.set(event.hash, event.seq);
  return h("ol", { class: "timeline", id: "events" }, events.map((event) => renderEvent(process, event, bySeq)));
}

function renderEvent(process, event, bySeq) {
  const envelope = event.envelope ?? {};
  const provenance = envelope.input?.meta?.automation;
  const roles = Array.isArray(event.actor_roles) ? event.actor_roles : [];
  const actor = event.actor_id ?? "key " + shortHash(envelope.actor);
  return h(
    "li",
    { class: "event" + (provenance ? " automated" : ""), id: "seq-" + event.seq, dataset: { seq: event.seq } },
    h("div", { class: "event-head" },
      h("span", { class: "seq" }, "#" + event.seq),
      h("strong", { class: "action" }, String(envelope.action ?? "")),
      event.kind === "spawn" ? h("span", { class: "tag" }, "spawned") : null,
      envelope.action === MIGRATE ? h("span", { class: "tag" }, "migration") : null,
      envelope.action === ERASE ? h("span", { class: "tag" }, "erasure") : null,
      provenance ? h("span", { class: "tag auto" }, provenance.kind === "scheduled_action" ? "scheduled" : "automatic") : null,
      h("span", { class: "verdict-mark" })),
    h("div", { class: "event-meta" },
      h("span", { class: "actor" }, actor, roles.length ? " (" + roles.join(", ") + ")" : ""),
      " · ",
      h("time", { datetime: envelope.at }, time(envelope.at)),
      " · ",
      event.revision
        ? [h("span", { class: "revision", title: "workflow version " + event.workflow_version }, "revision " + event.revision), " · "]
        : null,
      h("code", { class: "hash", title: event.hash }, shortHash(event.hash))),
    cause(process, envelope, provenance, bySeq),
    h("div", { class: "problems" }),
    h("div", { class: "erasures" }),
    Object.keys(envelope.input ?? {}).length
      ? h("details", {}, h("summary", {}, "input"), json(envelope.input))
      : null,
    personalDigests(envelope.sd),
  );
}

/** A v2 event's `sd`: which personal fields it commits to, by digest only. */
function personalDigests(sd) {
  const pointers = sd && typeof sd === "object" ? Object.keys(sd) : [];
  if (pointers.length === 0) return null;
  return h("details", { class: "sd" },
    h("summary", {}, "personal fields (digests only): " + pointers.join(", ")),
    json(sd));
}

/** Where an event came from: the event that scheduled or queued it, or the parent's
 * event that spawned this process. */
function cause(process, envelope, provenance, bySeq) {
  if (envelope.cause) {
    return h("p", { class: "cause" }, "spawned by event ", h("code", { title: envelope.cause }, shortHash(envelope.cause)),
      process.parent ? [" of ", link(paths.process(process.parent), process.parent)] : null);
  }
  if (envelope.action === MIGRATE) {
    // An operator's governed migration: the ticket it was made under, and where it went.
    return h("p", { class: "cause" }, "migrated to ", h("code", {}, String(envelope.input?.state ?? "")),
      " under ", h("code", {}, String(envelope.input?.reason ?? "")));
  }
  if (envelope.action === ERASE) return erasureCause(envelope.input ?? {}, bySeq);
  if (!provenance || typeof provenance !== "object") return null;
  const scheduled = provenance.kind === "scheduled_action";
  const hash = scheduled ? provenance.scheduled_by_event_hash : provenance.queued_by_event_hash;
  const seq = bySeq.get(hash);
  const what = scheduled ? "scheduled by event " : "queued by event ";
  const target = seq !== undefined ? h("a", { href: "#seq-" + seq, title: hash }, shortHash(hash)) : h("code", { title: hash }, shortHash(hash));
  return h("p", { class: "cause" }, what, target, seq !== undefined ? " at seq " + seq : "",
    scheduled && provenance.schedule_id ? " (schedule " + provenance.schedule_id + ")" : "",
    provenance.worker ? ", fired by worker " + provenance.worker : "");
}

/** A governed erasure: the legal basis and data-subject request it cites, and its scope
 * when it names one (events as links where they are in this chain). */
function erasureCause(input, bySeq) {
  const scope = input.scope && typeof input.scope === "object" ? input.scope : {};
  const eventRef = (hash) => bySeq.has(hash) ? h("a", { href: "#seq-" + bySeq.get(hash), title: hash }, "#" + bySeq.get(hash)) : h("code", { title: hash }, shortHash(hash));
  const parts = [];
  if (scope.events !== undefined) {
    const events = Array.isArray(scope.events) ? scope.events.flatMap((e, i) => [i ? ", " : "", eventRef(e)]) : String(scope.events);
    parts.push(["events ", events]);
  }
  if (scope.pointers !== undefined) {
    parts.push("pointers " + (Array.isArray(scope.pointers) ? scope.pointers.join(", ") : String(scope.pointers)));
  }
  return h("p", { class: "cause" }, "erased personal values on basis ", h("code", {}, String(input.basis ?? "")),
    " under request ", h("code", {}, String(input.request ?? "")),
    parts.length ? [", scope: ", parts.flatMap((p, i) => [i ? "; " : "", p])] : null);
}

function markVerification(timeline, verdict, report) {
  const problems = Array.isArray(report.problems) ? report.problems : [];
  const bySeq = new Map();
  const general = [];
  for (const p of problems) {
    if (p.seq === null || p.seq === undefined) general.push(p);
    else bySeq.set(p.seq, [...(bySeq.get(p.seq) ?? []), p]);
  }
  const erased = Array.isArray(report.erasure?.erased) ? report.erasure.erased : [];
  for (const item of timeline.querySelectorAll("li.event")) {
    const seq = Number(item.dataset.seq);
    const found = bySeq.get(seq) ?? [];
    item.querySelector(".erasures").replaceChildren(...erasedFrom(seq, erased));
    const mark = item.querySelector(".verdict-mark");
    const box = item.querySelector(".problems");
    item.classList.toggle("verified", found.length === 0);
    item.classList.toggle("broken", found.length > 0);
    mark.textContent = found.length ? "✗ problem" : "✓ verified";
    box.replaceChildren(...found.map((p) => h("p", { class: "error" }, p.code + ": " + p.message)));
  }
  const parts = [
    h("span", { class: report.ok ? "ok" : "error" },
      report.ok
        ? "Chain verified: " + report.events + (report.events === 1 ? " event" : " events") + "; every hash, signature and link checked."
        : "Verification found " + problems.length + " problem" + (problems.length === 1 ? "" : "s") + "."),
    report.ok && erased.length ? erasureNote(erased.length, report.erasure.unverifiable) : null,
    general.length ? h("ul", {}, general.map((p) => h("li", { class: "error" }, p.code + ": " + p.message))) : null,
  ];
  verdict.replaceChildren(...parts.filter(Boolean));
}

/** Lines saying which of event `seq`'s personal values an erase event took, one per
 * erase event, in chain order: "erased by event #6 (art17-1a): /dob, /name". */
function erasedFrom(seq, erased) {
  const byEraser = new Map();
  for (const e of erased) {
    if (e.seq !== seq) continue;
    const taken = byEraser.get(e.by_seq) ?? { basis: e.basis, pointers: [] };
    taken.pointers.push(e.pointer);
    byEraser.set(e.by_seq, taken);
  }
  return [...byEraser].sort(([a], [b]) => a - b).map(([by, taken]) =>
    h("p", {}, "erased by event ", h("a", { href: "#seq-" + by }, "#" + by), " (" + taken.basis + "): " + taken.pointers.join(", ")));
}

/** What verification says of erased values: each was taken by an erase event of this
 * chain that covers it (not deleted behind its back), and how many checks over them
 * could no longer be made. */
function erasureNote(count, unverifiable) {
  const skipped = Array.isArray(unverifiable) ? unverifiable.length : 0;
  return h("p", { class: "muted", id: "verdict-erasure" },
    count + " personal value" + (count === 1 ? "" : "s") + " erased by charter:erase; an erase event of this chain covers each.",
    skipped ? " " + skipped + " check" + (skipped === 1 ? "" : "s") + " over erased values could not be repeated." : "");
}

const OPEN = new Set(["active", "claimed", "pending", "failed"]);

function renderWork(automation, events, countdowns) {
  countdowns.clear();
  const bySeq = new Map(events.map((e) => [e.hash, e.seq]));
  const at = (hash) =>
    bySeq.has(hash)
      ? h("a", { href: "#seq-" + bySeq.get(hash), title: hash }, "seq " + bySeq.get(hash))
      : h("code", { title: hash }, shortHash(hash));
  const countdown = (value) => {
    const el = h("span", { class: "countdown" }, relative(value));
    countdowns.add(() => (el.textContent = relative(value)));
    return el;
  };
  const scheduled = (automation.scheduled ?? []).filter((r) => OPEN.has(r.status));
  const queue = (automation.queue ?? []).filter((r) => OPEN.has(r.status));
  const done = (automation.scheduled ?? []).length + (automation.queue ?? []).length - scheduled.length - queue.length;
  return [
    h("h3", {}, "Pending timers"),
    table(
      [
        { title: "Schedule", cell: (r) => r.schedule_id },
        { title: "Action", cell: (r) => r.action_name },
        { title: "Due", cell: (r) => [time(r.not_before ?? r.run_at), " ", countdown(r.not_before ?? r.run_at)] },
        { title: "Repeats", cell: (r) => r.interval ? "every " + r.interval : "once" },
        { title: "Status", cell: (r) => r.status },
        { title: "Attempts", cell: (r) => String(r.attempts) },
        { title: "Last error", cell: (r) => r.last_attempt_error ?? "" },
        { title: "Scheduled by", cell: (r) => at(r.created_event_hash) },
      ],
      scheduled,
      { empty: "No pending timers." },
    ),
    h("h3", {}, "Queued automatic actions"),
    table(
      [
        { title: "Action", cell: (r) => r.action_name },
        { title: "Status", cell: (r) => r.status },
        { title: "Queued", cell: (r) => time(r.queued_at) },
        { title: "Attempts", cell: (r) => String(r.attempts) },
        { title: "Last error", cell: (r) => r.last_error ?? "" },
        { title: "Queued by", cell: (r) => at(r.queued_by_event_hash) },
      ],
      queue,
      { empty: "No queued or failed automatic actions." },
    ),
    done ? h("p", { class: "muted" }, done + " finished or cancelled work row" + (done === 1 ? "" : "s") + " not shown.") : null,
  ];
}
