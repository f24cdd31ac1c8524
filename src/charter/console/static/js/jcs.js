// RFC 8785 (JCS) canonical JSON, the bytes Charter signs and hashes (docs/wire-format.md).
//
// Written here rather than vendored: RFC 8785 defines its number and string forms as
// ECMAScript's own JSON.stringify (ES2019+: shortest round-trip numbers, -0 as 0,
// lowercase \u00xx escapes), so what is left is sorting object keys by UTF-16 code
// units (JavaScript's default string order) and refusing what the server refuses
// rather than signing it: NaN and infinities, lone surrogates (JSON.stringify would
// escape them; I-JSON forbids them), integers beyond ±2^53, and values that are not
// JSON (undefined, functions, dates, maps). tests/browser/test_console_sign.py checks
// the output byte for byte against Python's rfc8785 package.

export class CanonicalError extends Error {
  name = "CanonicalError";
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The canonical JSON text of `value`. */
export function canonicalize(value) {
  return write(value, 0);
}

/** The canonical UTF-8 bytes of `value`. */
export function canonicalBytes(value) {
  return new TextEncoder().encode(canonicalize(value));
}

const MAX_DEPTH = 256;

function write(value, depth) {
  if (depth > MAX_DEPTH) throw new CanonicalError("nesting too deep");
  if (value === null || typeof value === "boolean") return String(value);
  if (typeof value === "number") return number(value);
  if (typeof value === "string") return string(value);
  if (Array.isArray(value)) return "[" + value.map((item) => write(item, depth + 1)).join(",") + "]";
  if (typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {
    const keys = Object.keys(value).sort(); // UTF-16 code unit order, as RFC 8785 §3.2.3 says
    return "{" + keys.map((key) => string(key) + ":" + write(value[key], depth + 1)).join(",") + "}";
  }
  throw new CanonicalError("not a JSON value: " + Object.prototype.toString.call(value));
}

function number(value) {
  if (!Number.isFinite(value)) throw new CanonicalError("NaN and infinities are not JSON");
  if (Number.isInteger(value) && !Number.isSafeInteger(value) && Math.abs(value) < 1e21) {
    // Written as digits, it would claim a precision the number does not have (I-JSON).
    throw new CanonicalError("integer " + value + " is beyond ±2^53");
  }
  return JSON.stringify(value);
}

function string(value) {
  if (LONE_SURROGATE.test(value)) throw new CanonicalError("a string holds a lone surrogate (not UTF-8)");
  return JSON.stringify(value);
}
