// The process page's "Act" section: take a governed action, signed in this browser.
//
// The actions offered are those the workflow definition in force allows from the
// process's state (create actions and those only the automation actor may take are
// left out). The operator picks the actor and that actor's key file; the file is read
// here with FileReader into a non-extractable WebCrypto key and is never sent or
// stored. Submitting reads the head, builds the v1 envelope, signs its RFC 8785 bytes
// and POSTs {envelope, signature} to /v1/events, as `charter submit` does; on
// stale_prev it re-reads the head and signs once more. An action with personal fields
// (the workflow reading's `personal` map) gets a v2 envelope instead: those fields
// leave the signed input, `sd` commits to them and their disclosures go beside the
// signature (disclosures.js). A browser without Ed25519 in WebCrypto is told so and
// gets the equivalent `charter submit` command instead.

import { ApiError, get, post, processPath } from "./api.js";
import { digests, splitPersonal } from "./disclosures.js";
import { h } from "./dom.js";
import { shortHash } from "./format.js";
import { canonicalize } from "./jcs.js";
import { schemaForm } from "./schema-form.js";
import { ed25519Problem, KeyFileError, parseKeyFile, signEnvelope, signingKey, timestamp } from "./signing.js";

/** The section's card and `show(process)`, called with each fresh read of the process
 * (the form is rebuilt only when the state or workflow changes, so typing survives
 * live updates). `onAccepted()` is called after an accepted event. */
export function actSection(processId, { onAccepted }) {
  const body = h("div", { class: "body" }, h("p", { class: "muted" }, "Loading…"));
  const card = h("section", { class: "card", id: "act" }, h("h2", {}, "Act"), body);
  let shown = null; // "workflow\nstate" the form was built for
  let signer = null; // {privateKey, publicKey, fileName}: in this closure only
  let carried = null; // the last outcome, kept when the accepted event rebuilds the form

  async function show(process) {
    const key = process.workflow + "\n" + process.state;
    if (key === shown) return;
    shown = key;
    try {
      const [workflow, actorList, problem] = await Promise.all([
        get("/v1/workflows/" + process.workflow.split("/").map(encodeURIComponent).join("/")),
        get("/v1/actors"),
        ed25519Problem(),
      ]);
      // A server older than envelope v2 answers no `personal` map: every action stays v1.
      const personal = isObject(workflow.personal) ? workflow.personal : {};
      body.replaceChildren(...render(process, workflow.definition ?? {}, personal, actorList.items ?? [], problem));
    } catch (error) {
      if (error instanceof ApiError && error.status === 403) {
        card.remove(); // what the token may not read, it cannot act on here either
        return;
      }
      shown = null;
      body.replaceChildren(h("p", { class: "error" }, describe(error)));
    }
  }

  function render(process, definition, personal, actors, problem) {
    const actions = available(definition, process.state);
    if (actions.length === 0) {
      return [h("p", { class: "muted", id: "no-actions" }, "No action can be taken by hand in state " + process.state + ".")];
    }
    const actionSelect = h("select", { id: "action", name: "action" },
      actions.map(([name, action]) => h("option", { value: name }, name + " — " + describeAction(action))));
    const actorSelect = h("select", { id: "actor", name: "actor" },
      h("option", { value: "" }, "—"),
      actors.filter((a) => !a.disabled).map((a) => h("option", { value: a.id }, a.id + (a.roles?.length ? " (" + a.roles.join(", ") + ")" : ""))));
    const keyInput = h("input", { type: "file", id: "key-file", name: "key-file", accept: ".key,.txt,text/plain" });
    const keyStatus = h("p", { class: "muted", id: "key-status", "aria-live": "polite" },
      signer ? keyLine(signer) : "The key file is read in this browser only; it is never uploaded or stored.");
    const fieldBox = h("div", { class: "fields", id: "input-fields" });
    const personalNote = h("p", { class: "muted", id: "personal-note", hidden: true },
      "Fields tagged personal are kept off the signed record: the envelope carries a salted digest of each, " +
      "and the value travels beside the signature, so it can be erased later without breaking the chain.");
    const submit = h("button", { type: "submit", id: "sign-submit" }, problem ? "Show the CLI command" : "Sign and submit");
    const result = h("div", { id: "act-result", "aria-live": "polite" }, carried);
    carried = null;
    const cli = h("pre", { class: "cli", id: "cli-command", hidden: true });
    let form = null;

    const byName = new Map(actions);
    const pointersOf = (name) => (Array.isArray(personal[name]) ? personal[name].filter((p) => typeof p === "string") : []);
    const build = () => {
      const action = byName.get(actionSelect.value);
      const pointers = pointersOf(actionSelect.value);
      form = schemaForm(action.input, "in-" + actionSelect.value, { personal: pointers });
      fieldBox.replaceChildren(...form.fields.filter(Boolean));
      personalNote.hidden = pointers.length === 0;
      if (result.firstChild !== carried) result.replaceChildren();
      cli.hidden = true;
    };
    actionSelect.addEventListener("change", build);
    build();

    keyInput.addEventListener("change", async () => {
      const file = keyInput.files?.[0];
      signer = null;
      if (!file) {
        keyStatus.replaceChildren("No key file chosen.");
        return;
      }
      keyStatus.className = "muted";
      keyStatus.replaceChildren("Reading " + file.name + "…");
      try {
        const seed = parseKeyFile(await readText(file));
        signer = problem ? { fileName: file.name } : { ...(await signingKey(seed)), fileName: file.name };
        seed.fill(0); // the bytes are not needed once WebCrypto holds the key
        keyStatus.replaceChildren(keyLine(signer));
      } catch (error) {
        keyStatus.className = "error";
        keyStatus.replaceChildren(error instanceof KeyFileError ? error.message : "Cannot use this key: " + (error?.message ?? error));
      }
    });

    const formElement = h("form", { class: "act", id: "act-form", novalidate: true },
      problem ? h("p", { class: "unavailable", id: "sign-unsupported" },
        "This browser cannot sign here: " + problem + " Fill in the form to get the equivalent `charter submit` command.") : null,
      h("div", { class: "signer" },
        h("div", { class: "field" }, h("label", { for: "actor" }, "Actor"), actorSelect),
        h("div", { class: "field" }, h("label", { for: "key-file" }, "Key file"), keyInput)),
      keyStatus,
      h("div", { class: "field" }, h("label", { for: "action" }, "Action"), actionSelect),
      fieldBox,
      personalNote,
      h("div", { class: "actions" }, submit),
      result,
      cli);

    formElement.addEventListener("submit", async (event) => {
      event.preventDefault();
      const { value: input, errors } = form.read();
      const actor = actors.find((a) => a.id === actorSelect.value);
      if (!actor) errors.unshift("Choose the actor who takes this action.");
      if (errors.length) {
        result.replaceChildren(h("ul", { class: "error", id: "form-errors" }, errors.map((e) => h("li", {}, e))));
        return;
      }
      if (problem) {
        cli.textContent = cliCommand(process, actionSelect.value, input, signer?.fileName ?? actor.id + ".key");
        cli.hidden = false;
        result.replaceChildren(h("p", { class: "muted" }, "Run this where the key file is (it reads the head and signs there):"),
          pointersOf(actionSelect.value).length
            ? h("p", { class: "error", id: "cli-personal" },
              "charter submit signs v1 envelopes only: the server refuses a personal field of this action sent in clear (personal_in_clear).")
            : null);
        return;
      }
      if (!signer) {
        result.replaceChildren(h("p", { class: "error" }, "Choose " + actor.id + "'s key file."));
        return;
      }
      if (signer.publicKey !== actor.public_key) {
        result.replaceChildren(h("p", { class: "error" },
          "This key file is not " + actor.id + "'s current key (its public key is " + shortHash(signer.publicKey) + ")."));
        return;
      }
      submit.disabled = true;
      result.replaceChildren(h("p", { class: "muted" }, "Signing…"));
      try {
        const accepted = await signAndSubmit(processId, process.workflow, actionSelect.value, input, pointersOf(actionSelect.value), signer);
        result.replaceChildren(h("p", { class: "ok", id: "accepted" },
          "Accepted: " + actionSelect.value + " as event #" + accepted.seq + ", hash ",
          h("code", { title: accepted.hash }, shortHash(accepted.hash)),
          accepted.retried ? " (the head moved; signed again on the new head)" : "", "."));
        carried = result.firstChild;
        // A live update may have rebuilt the form while the answer was on its way: then
        // this form is gone, and the next build must show the outcome.
        if (!result.isConnected) shown = null;
        onAccepted();
      } catch (error) {
        result.replaceChildren(h("p", { class: "error", id: "refused" },
          error instanceof ApiError ? "Refused: " + error.code + ": " + error.message : describe(error)));
      } finally {
        submit.disabled = false;
      }
    });
    return [formElement];
  }

  return { card, show };
}

/** Sign and submit on the current head; on stale_prev, once more on the new head. An
 * action with `personal` pointers is signed as v2: its personal fields go out as
 * disclosures, committed to by `sd`. */
async function signAndSubmit(processId, workflow, action, input, personal, signer) {
  for (let attempt = 0; ; attempt++) {
    const process = await get(processPath(processId));
    // Fresh salts for every envelope signed, the one re-signed after stale_prev too.
    const split = personal.length ? await splitPersonal(input, personal) : null;
    const rest = { prev: process.head ?? null, actor: signer.publicKey, at: timestamp() };
    const envelope = split
      ? { v: 2, process: processId, workflow, action, input: split.input, sd: digests(split.disclosures), ...rest }
      : { v: 1, process: processId, workflow, action, input, ...rest };
    const { submission, hash } = await signEnvelope(envelope, signer.privateKey);
    // The envelope goes out in its canonical form: the bytes that were signed. An empty
    // `sd` (every personal field left out) has no disclosures, and then none are sent.
    const disclosures = split?.disclosures.length ? ',"disclosures":' + canonicalize(split.disclosures.map((d) => d.text)) : "";
    const text = '{"envelope":' + canonicalize(submission.envelope) + ',"signature":"' + submission.signature + '"' + disclosures + "}";
    try {
      const accepted = await post("/v1/events", { body: text });
      if (accepted.hash !== hash) throw new Error("the server stored hash " + accepted.hash + ", not the signed " + hash);
      return { ...accepted, retried: attempt > 0 };
    } catch (error) {
      if (!(error instanceof ApiError && error.code === "stale_prev" && attempt === 0)) throw error;
    }
  }
}

/** The actions a person may take from `state` (in the stored definition's key order). */
export function available(definition, state) {
  const actions = definition && typeof definition.actions === "object" ? Object.entries(definition.actions) : [];
  return actions.filter(([, action]) => {
    if (!action || typeof action !== "object") return false;
    if ((action.type ?? "transition") === "create" || (action.auto !== undefined && action.auto !== false)) return false;
    const roles = [action.role].flat();
    if (roles.length > 0 && roles.every((r) => r === "AUTOMATION")) return false;
    const from = action.from;
    return from === "*" || from === state || (Array.isArray(from) && from.includes(state));
  });
}

function describeAction(action) {
  const roles = [action.role].flat().filter(Boolean).join(" or ");
  const type = action.type ?? "transition";
  return (type === "transition" ? "to " + action.to : "update") + ", role " + roles;
}

function keyLine(signer) {
  return signer.publicKey
    ? "Key from " + signer.fileName + " loaded: public key " + shortHash(signer.publicKey) + " (kept in this page only)."
    : "Key file " + signer.fileName + " chosen (not read: this browser cannot sign).";
}

/** `charter submit` for the same action, the input as one shell-quoted JSON word. */
export function cliCommand(process, action, input, keyFile) {
  return ["charter submit", "--key-file " + shellQuote(keyFile), "--process " + shellQuote(process.id),
    "--workflow " + shellQuote(process.workflow), "--action " + shellQuote(action),
    "--input " + shellQuote(JSON.stringify(input))].join(" \\\n  ");
}

function shellQuote(text) {
  return /^[A-Za-z0-9._:/@=-]+$/.test(text) ? text : "'" + text.replace(/'/g, "'\\''") + "'";
}

function readText(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result));
    reader.onerror = () => reject(reader.error);
    reader.readAsText(file);
  });
}

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function describe(error) {
  return error instanceof ApiError ? error.code + ": " + error.message : "Could not act: " + String(error?.message ?? error);
}
