// Live hints from GET /v1/stream (Server-Sent Events). EventSource cannot send an
// Authorization header, so the stream is read with fetch and parsed here. The stream
// carries hints only (process, seq, action); pages re-read what they show. Where the
// server has no stream (404), pages fall back to polling.

import { request, ApiError } from "./api.js";

let controller = null;
let lastId = null;
const subscribers = new Set();
let state = "off"; // "off" | "live" | "polling"
const stateListeners = new Set();

export function onLiveState(listener) {
  stateListeners.add(listener);
  listener(state);
}

function setState(next) {
  state = next;
  stateListeners.forEach((l) => l(state));
}

/** Call `handler(kind, data)` for every hint until the returned function is called. */
export function subscribe(handler) {
  subscribers.add(handler);
  return () => subscribers.delete(handler);
}

export function isPolling() {
  return state === "polling";
}

export function start() {
  if (controller) return;
  controller = new AbortController();
  run(controller.signal);
}

export function stop() {
  controller?.abort();
  controller = null;
  setState("off");
}

async function run(signal) {
  let backoff = 1000;
  while (!signal.aborted) {
    try {
      const headers = { Accept: "text/event-stream" };
      if (lastId) headers["Last-Event-ID"] = lastId;
      const response = await request("/v1/stream", { signal, headers });
      setState("live");
      backoff = 1000;
      await read(response.body, signal);
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof ApiError && (error.status === 404 || error.status === 403 || error.status === 401)) {
        setState("polling"); // no stream here (or not for this token): pages poll
        return;
      }
    }
    if (signal.aborted) return;
    setState("reconnecting");
    await new Promise((resolve) => setTimeout(resolve, backoff));
    backoff = Math.min(backoff * 2, 30000);
  }
}

async function read(stream, signal) {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  while (!signal.aborted) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      dispatch(block);
    }
  }
}

function dispatch(block) {
  let kind = "message";
  const data = [];
  for (const line of block.split(/\r?\n/)) {
    if (line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") kind = value;
    else if (field === "data") data.push(value);
    else if (field === "id") lastId = value;
  }
  if (data.length === 0) return;
  let parsed;
  try {
    parsed = JSON.parse(data.join("\n"));
  } catch {
    return;
  }
  subscribers.forEach((handler) => handler(kind, parsed));
}
