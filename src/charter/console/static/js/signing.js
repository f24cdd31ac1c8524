// Ed25519 signing in the browser with WebCrypto (docs/wire-format.md). The secret key is read from
// the key file `charter keys new` writes (64 lowercase hex characters: the 32-byte seed,
// an optional newline), imported as a non-extractable CryptoKey, and never leaves this
// page: nothing here sends or stores it.

import { canonicalBytes } from "./jcs.js";

export class KeyFileError extends Error {}

const ED25519 = { name: "Ed25519" };
// PKCS#8 (RFC 8410) for an Ed25519 seed: the fixed DER prefix, then the 32 bytes.
// WebCrypto imports a private key only as pkcs8 or jwk ('raw' is for public keys).
const PKCS8_PREFIX = hexBytes("302e020100300506032b657004220420");

// RFC 8032 §7.1 TEST 1: the feature check signs with it and compares, so a browser
// whose Ed25519 is missing or wrong is caught before anyone signs with it.
const TEST_SEED = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
const TEST_SIGNATURE =
  "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";

let support = null;

/** Whether this browser can sign Ed25519 through WebCrypto: null when it can, else why not. */
export function ed25519Problem() {
  support ??= probe();
  return support;
}

async function probe() {
  if (!globalThis.crypto?.subtle) {
    return "WebCrypto is not available here (browsers offer it only on https:// or localhost pages).";
  }
  try {
    const key = await importSeed(hexBytes(TEST_SEED), false);
    const signature = hex(await crypto.subtle.sign(ED25519, key, new Uint8Array()));
    if (signature !== TEST_SIGNATURE) return "this browser's Ed25519 gives a wrong signature for the RFC 8032 test vector.";
    return null;
  } catch (error) {
    return "this browser's WebCrypto does not support Ed25519 (" + (error?.message || error?.name || String(error)) + ").";
  }
}

/** The seed in a key file's text. The message never repeats the text: it may be a
 * secret in the wrong format. */
export function parseKeyFile(text) {
  const body = text.endsWith("\n") ? text.slice(0, -1) : text;
  if (!/^[0-9a-f]{64}$/.test(body)) {
    throw new KeyFileError(
      "this file does not hold a secret key (expected 64 lowercase hex characters and an optional newline, as `charter keys new` writes)",
    );
  }
  return hexBytes(body);
}

/** A signing key from a seed: {privateKey (non-extractable), publicKey (64 hex)}. */
export async function signingKey(seed) {
  // The public key comes from the JWK export of an extractable copy (its `x`), which is
  // then dropped; the key that signs cannot be exported.
  const jwk = await crypto.subtle.exportKey("jwk", await importSeed(seed, true));
  const publicKey = hex(base64urlBytes(jwk.x));
  return { privateKey: await importSeed(seed, false), publicKey };
}

function importSeed(seed, extractable) {
  const der = new Uint8Array(PKCS8_PREFIX.length + seed.length);
  der.set(PKCS8_PREFIX);
  der.set(seed, PKCS8_PREFIX.length);
  return crypto.subtle.importKey("pkcs8", der, ED25519, extractable, ["sign"]);
}

/** The submission body for `envelope`: {envelope, signature}, and the event's hash
 * (lowercase hex SHA-256 of the canonical bytes, which are what is signed). */
export async function signEnvelope(envelope, privateKey) {
  const message = canonicalBytes(envelope);
  const [signature, digest] = await Promise.all([
    crypto.subtle.sign(ED25519, privateKey, message),
    crypto.subtle.digest("SHA-256", message),
  ]);
  return { submission: { envelope, signature: hex(signature) }, hash: hex(digest) };
}

/** `at` as the CLI writes it: UTC, milliseconds, Z (toISOString's form exactly). */
export function timestamp(date = new Date()) {
  return date.toISOString();
}

export function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
}

function hexBytes(text) {
  return new Uint8Array(text.match(/../g).map((pair) => parseInt(pair, 16)));
}

function base64urlBytes(text) {
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(text.length / 4) * 4, "="));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}
