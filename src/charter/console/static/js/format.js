// Small formatting helpers: times, durations, hashes.

export function shortHash(hash) {
  return typeof hash === "string" ? hash.slice(0, 12) : "—";
}

export function time(value) {
  if (!value) return "—";
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return String(value);
  return date.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z").replace(/:00Z$/, ":00Z");
}

/** "in 3h 12m" / "5m ago", from now. */
export function relative(value, now = Date.now()) {
  if (!value) return "";
  const ms = new Date(value).getTime() - now;
  const text = duration(Math.abs(ms));
  return ms >= 0 ? "in " + text : text + " ago";
}

export function duration(ms) {
  let s = Math.round(ms / 1000);
  const parts = [];
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]]) {
    if (s >= size || (unit === "s" && parts.length === 0)) {
      parts.push(Math.floor(s / size) + unit);
      s %= size;
    }
    if (parts.length === 2) break;
  }
  return parts.join(" ");
}
