// A page is made of sections that load on their own. A section whose data the token's
// scopes forbid (403) gives way to one line naming the scope it lacks (so a page is never
// blank for want of a scope); one whose API route this server lacks (an operator
// endpoint not deployed yet) says so plainly; a run, automation or plan the server does
// not show this token says "not found, or owned by another principal" (only a `*` token
// sees every principal's); other errors show their code and message.

import { ApiError } from "./api.js";
import { h } from "./dom.js";

/** A card titled `title` whose body is what `render()` resolves to.
 * `needs` names the endpoint, for the "not available" message. */
export function section(title, render, { needs, id } = {}) {
  const body = h("div", { class: "body" }, h("p", { class: "muted" }, "Loading…"));
  const card = h("section", { class: "card", id }, title ? h("h2", {}, title) : null, body);
  fill(card, body, render, needs);
  return card;
}

export async function fill(card, body, render, needs) {
  try {
    const content = await render();
    body.replaceChildren(...[content].flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  } catch (error) {
    if (error instanceof ApiError && error.status === 403) {
      // What the token may not see is not shown; the line says what would show it.
      card.replaceWith(forbidden(card.querySelector("h2")?.textContent ?? "", error));
      return;
    }
    body.replaceChildren(problem(error, needs));
  }
}

/** The line that stands for a section the token may not read: its title and the scope. */
export function forbidden(title, error) {
  const lead = title ? title + ": not shown, " : "Not shown: ";
  const why = error.scope
    ? [
        "this token lacks the scope " + error.scope + " (",
        h("code", {}, "charter tokens create --scope " + error.scope),
        " makes a token that has it).",
      ]
    : ["this token may not read it (" + error.message + ")."];
  return h("p", { class: "forbidden muted", role: "note" }, lead, ...why);
}

/** The paragraph that explains a failed load. */
export function problem(error, needs) {
  if (error instanceof ApiError && error.routeMissing) {
    return h(
      "p",
      { class: "unavailable" },
      "Not available on this server",
      needs ? ": it needs " + needs + " (the operator API)." : ".",
    );
  }
  if (error instanceof ApiError && error.thingMissing) {
    return h("p", { class: "error missing" }, "Not found, or owned by another principal (" + error.message + ").");
  }
  if (error instanceof ApiError) {
    return h("p", { class: "error" }, error.code + ": " + error.message);
  }
  return h("p", { class: "error" }, "Could not load: " + String(error?.message ?? error));
}
