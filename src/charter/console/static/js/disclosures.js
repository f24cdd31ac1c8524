// Disclosures for a v2 envelope (docs/wire-format.md, "Envelope v2"): the browser's
// counterpart of charter.core.disclosures. An action's personal fields leave the signed
// input; the envelope's `sd` maps each one's JSON pointer to the digest of its
// disclosure, the canonical (RFC 8785) text of [salt, pointer, value], and the texts go
// beside the signature. The salt, 16 random bytes, keeps a digest from confirming a
// guessed value. tests/browser/test_console_personal.py checks the digest of the golden
// vector against the one Python computes.

import { CanonicalError, canonicalize } from "./jcs.js";
import { hex } from "./signing.js";

export class DisclosureError extends Error {
  name = "DisclosureError";
}

const SALT_BYTES = 16;
// 16 bytes are 22 unpadded base64url characters; the last carries 2 bits and 4 zero bits,
// so it is one of the four whose low 4 bits are zero.
const SALT = /^[A-Za-z0-9_-]{21}[AQgw]$/;
// One or more "/token", "~" only in the escapes ~0 and ~1.
const POINTER = /^(?:\/(?:[^~/]|~[01])*)+$/;

/** A fresh salt: 16 bytes from the browser's CSPRNG, as unpadded base64url. */
export function newSalt() {
  const bytes = crypto.getRandomValues(new Uint8Array(SALT_BYTES));
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The disclosure of `value` at `pointer`: {salt, pointer, value, text, digest}. */
export async function makeDisclosure(pointer, value, salt = newSalt()) {
  if (typeof salt !== "string" || !SALT.test(salt)) {
    throw new DisclosureError("disclosure salt must be 22 base64url characters encoding 16 bytes");
  }
  if (typeof pointer !== "string" || !POINTER.test(pointer)) {
    throw new DisclosureError("disclosure pointer must be a non-empty RFC 6901 JSON pointer");
  }
  let text;
  try {
    text = canonicalize([salt, pointer, value]);
  } catch (error) {
    // The canonicalizer's reason may quote the value: name the field only.
    if (error instanceof CanonicalError) throw new DisclosureError("the value at " + pointer + " is not I-JSON");
    throw error;
  }
  const digest = hex(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text)));
  return { salt, pointer, value, text, digest };
}

/** `input` without the personal fields present in it, and a disclosure for each (as
 * split_personal does). A field that is absent commits to nothing; a pointer below
 * another personal one travels inside that one's disclosure. `input` is not changed. */
export async function splitPersonal(input, personal) {
  for (const pointer of personal) {
    if (typeof pointer !== "string" || !POINTER.test(pointer)) {
      throw new DisclosureError("not a non-empty RFC 6901 JSON pointer: " + JSON.stringify(pointer));
    }
  }
  const clear = copy(input);
  const unique = new Map(personal.map((pointer) => [toPointer(tokens(pointer)), tokens(pointer)]));
  // Ancestors first (a path sorts before its extensions): once a field is taken out, the
  // pointers below it find it absent.
  const paths = [...unique.values()].sort(comparePaths);
  const disclosures = [];
  for (const path of paths) {
    const parent = parentObject(clear, path);
    const key = path[path.length - 1];
    if (parent === null || !Object.hasOwn(parent, key)) continue;
    const value = parent[key];
    delete parent[key];
    disclosures.push(await makeDisclosure(toPointer(path), value));
  }
  return { input: clear, disclosures };
}

/** The `sd` member committing to `disclosures`: each pointer's digest. */
export function digests(disclosures) {
  return Object.fromEntries(disclosures.map((d) => [d.pointer, d.digest]));
}

function tokens(pointer) {
  // ~1 before ~0 (RFC 6901): "~01" is the token "~1", not "/".
  return pointer.slice(1).split("/").map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function toPointer(path) {
  return path.map((key) => "/" + key.replace(/~/g, "~0").replace(/\//g, "~1")).join("");
}

function comparePaths(a, b) {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
  }
  return a.length - b.length;
}

/** The object holding the last key of `path`, walking own members that are objects
 * only (never arrays); null when one on the way is absent or not an object. */
function parentObject(document, path) {
  let node = document;
  for (const key of path.slice(0, -1)) {
    const child = Object.hasOwn(node, key) ? node[key] : undefined;
    if (!isPlainObject(child)) return null;
    node = child;
  }
  return node;
}

// Entries and Object.fromEntries, so that a member named "__proto__" stays a member.
function copy(value) {
  if (Array.isArray(value)) return value.map(copy);
  if (isPlainObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, copy(v)]));
  return value;
}

function isPlainObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
