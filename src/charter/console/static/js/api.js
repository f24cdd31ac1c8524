// The JSON API, called with the bearer token the operator signed in with. The token
// lives in sessionStorage: it survives a reload but not the browser session, and it is
// never put in a URL.

const KEY = "charter.console.token";

export const session = {
  token: () => sessionStorage.getItem(KEY),
  signIn: (token) => sessionStorage.setItem(KEY, token),
  signOut: () => sessionStorage.removeItem(KEY),
};

/** An API error: HTTP status, Charter's error code and message. A 404 `not_found` whose
 * message is "no route ..." is a route this server does not have (an API older than the
 * console); any other 404 `not_found` is a thing (a run, an automation, a plan, a
 * machine) that does not exist or belongs to another principal. A 403 `forbidden` names
 * the scope the token lacks (`scope`, null when the answer does not say). */
export class ApiError extends Error {
  constructor(status, code, message, scope = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.scope = scope;
  }
  get routeMissing() {
    return this.status === 404 && this.code === "not_found" && this.message.startsWith("no route");
  }
  get thingMissing() {
    return this.status === 404 && this.code === "not_found" && !this.routeMissing;
  }
}

const listeners = new Set();
/** Called with the error whenever the API answers 401 (the token is no longer good). */
export function onUnauthorized(listener) {
  listeners.add(listener);
}

export function url(path, query = {}) {
  const target = new URL(path, location.origin);
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") target.searchParams.set(name, value);
  }
  return target;
}

export async function request(
  path,
  { query, signal, headers = {}, token = session.token(), method = "GET", body } = {},
) {
  const response = await fetch(url(path, query), {
    method,
    headers: {
      Accept: "application/json",
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      ...headers,
      Authorization: "Bearer " + (token ?? ""),
    },
    body,
    signal,
    cache: "no-store",
  });
  if (!response.ok) {
    let answer = null;
    try {
      answer = await response.json();
    } catch {
      // not JSON: keep the status line
    }
    const error = answer?.error ?? {};
    const failure = new ApiError(
      response.status,
      String(error.code ?? "http_" + response.status),
      String(error.message ?? response.statusText),
      typeof error.scope === "string" ? error.scope : null,
    );
    if (response.status === 401 && token === session.token()) listeners.forEach((l) => l(failure));
    throw failure;
  }
  return response;
}

export async function get(path, options) {
  return (await request(path, options)).json();
}

/** A POST (without a body for the operator actions: cancel, retry; `body` is JSON
 * text for a signed event); its JSON answer. */
export async function post(path, options) {
  return (await request(path, { ...options, method: "POST" })).json();
}

/** The /v1 path of a process's resource. */
export function processPath(id, tail = "") {
  return "/v1/processes/" + encodeURIComponent(id) + tail;
}
