// The console's entry point: sign-in, the navigation, and a client router over stable
// URLs (the server answers every /console/* path with this same shell page).

import { ApiError, get, onUnauthorized, session } from "./api.js";
import { h } from "./dom.js";
import * as live from "./live.js";
import { overviewPage } from "./page-overview.js";
import { processesPage } from "./page-processes.js";
import { processPage } from "./page-process.js";
import { workflowsPage, workflowPage } from "./page-workflows.js";
import { automationsPage } from "./page-automations.js";
import { runPage } from "./page-run.js";
import { machinesPage } from "./page-machines.js";
import { navigate } from "./navigation.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const signOutButton = document.getElementById("sign-out");
const liveBadge = document.getElementById("live");
let leave = null; // the current page's clean-up (timers, subscriptions)

const ROUTES = [
  [/^$/, () => overviewPage()],
  [/^processes$/, () => processesPage()],
  [/^processes\/(.+)$/, (m) => processPage(decodeURIComponent(m[1]))],
  [/^workflows$/, () => workflowsPage()],
  [/^workflows\/(.+)$/, (m) => workflowPage(m[1].split("/").map(decodeURIComponent).join("/"))],
  [/^automations$/, () => automationsPage()],
  [/^runs\/(.+)$/, (m) => runPage(decodeURIComponent(m[1]))],
  [/^machines$/, () => machinesPage()],
];

function route() {
  leave?.();
  leave = null;
  if (!session.token()) {
    showSignIn();
    return;
  }
  const page = location.pathname.replace(/^\/console\/?/, "").replace(/\/$/, "");
  for (const [pattern, render] of ROUTES) {
    const match = page.match(pattern);
    if (match) {
      const { title, content, cleanup } = render(match);
      document.title = title + " · Charter console";
      main.replaceChildren(...[content].flat(Infinity).filter(Boolean));
      leave = cleanup ?? null;
      markNav(page);
      return;
    }
  }
  document.title = "Not found · Charter console";
  main.replaceChildren(h("h1", {}, "Not found"), h("p", {}, "No console page at this address."));
}

function markNav(page) {
  const top = page.split("/")[0] || "overview";
  for (const a of nav.querySelectorAll("a")) {
    const current = a.dataset.nav === top || (top === "runs" && a.dataset.nav === "automations");
    if (current) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

// Same-origin links to console pages navigate in the page; others behave as usual.
document.addEventListener("click", (event) => {
  const a = event.target.closest?.("a[href]");
  if (!a || event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey || a.hasAttribute("download")) return;
  const target = new URL(a.href, location.href);
  if (target.origin !== location.origin || !target.pathname.startsWith("/console/")) return;
  if (target.pathname === location.pathname && target.hash) return; // in-page anchor
  event.preventDefault();
  navigate(target.pathname + target.search + target.hash);
});
window.addEventListener("popstate", route);

// --- signing in and out --------------------------------------------------------------

function showSignIn(message) {
  nav.hidden = true;
  signOutButton.hidden = true;
  liveBadge.hidden = true;
  live.stop();
  document.title = "Sign in · Charter console";
  const input = h("input", {
    type: "password", id: "token", name: "token", autocomplete: "off", required: true,
    placeholder: "API token",
  });
  const error = h("p", { class: "error", id: "sign-in-error", role: "alert", hidden: !message }, message ?? "");
  const button = h("button", { type: "submit" }, "Sign in");
  const form = h(
    "form",
    { class: "sign-in card", id: "sign-in" },
    h("h1", {}, "Sign in"),
    h("label", { for: "token" }, "API token"),
    input,
    h("p", { class: "muted" }, "A token from `charter tokens create` (or the admin token `charter up` wrote). It is kept for this browser session only."),
    button,
    error,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    error.hidden = true;
    try {
      await check(input.value.trim());
      session.signIn(input.value.trim());
      signedIn();
    } catch (failure) {
      error.textContent = failure.message;
      error.hidden = false;
      input.select();
    } finally {
      button.disabled = false;
    }
  });
  main.replaceChildren(form);
  input.focus();
}

/** A token is good when the API knows it: 401 is a wrong token, 403 a good one that
 * lacks `processes:read` (it may still read runs or automations). */
async function check(token) {
  if (!token) throw new Error("Enter a token.");
  try {
    await get("/v1/workflows", { token });
  } catch (failure) {
    if (failure instanceof ApiError && failure.status === 403) return;
    if (failure instanceof ApiError && failure.status === 401) {
      throw new Error("That token is not accepted: " + failure.message + ".");
    }
    throw new Error("Could not reach the API: " + failure.message);
  }
}

function signedIn() {
  nav.hidden = false;
  signOutButton.hidden = false;
  live.start();
  probeScopes();
  route();
}

/** Hide the navigation entries the token's scopes forbid (only a 403 hides: any other
 * failure leaves the entry, and its page says what went wrong). */
async function probeScopes() {
  const can = async (path, query = {}) => {
    try {
      await get(path, { query });
      return true;
    } catch (failure) {
      return !(failure instanceof ApiError && failure.status === 403);
    }
  };
  const [processes, automations, runs] = await Promise.all([
    can("/v1/workflows"),
    can("/v1/automations", { limit: 1 }),
    can("/v1/runs", { limit: 1 }),
  ]);
  const hide = (name, hidden) => {
    const entry = nav.querySelector(`a[data-nav="${name}"]`);
    if (entry) entry.hidden = hidden;
  };
  hide("processes", !processes);
  hide("workflows", !processes);
  hide("automations", !automations && !runs);
  hide("machines", !automations); // GET /v1/machines needs automations:read too
}

signOutButton.addEventListener("click", () => {
  session.signOut();
  history.pushState(null, "", "/console/");
  route();
});

onUnauthorized((failure) => {
  session.signOut();
  showSignIn("Signed out: " + failure.message + ".");
});

live.onLiveState((state) => {
  liveBadge.hidden = state === "off";
  liveBadge.textContent = { live: "● live", polling: "○ polling", reconnecting: "◌ reconnecting" }[state] ?? "";
  liveBadge.className = "live " + state;
});

if (session.token()) signedIn();
else route();
