// An action's input form, generated from its JSON Schema (draft 2020-12, as the
// workflow declares it). Strings, numbers, integers, booleans and enums of an object
// schema's properties get their own fields; anything else (nested objects, arrays,
// combinators, untyped values) is a JSON text field checked here before signing. When
// the schema lets the input carry more than its declared properties, one more field
// takes extra members as a JSON object. The engine checks the schema again: this form
// catches mistakes early, it is not the authority. Fields the action marks personal
// carry a "personal" tag (act.js keeps them off the signed record).

import { h } from "./dom.js";

/** The form fields for `schema` and a reader: {fields, read() -> {value, errors}}.
 * `personal` lists the action's personal pointers (from the workflow reading). */
export function schemaForm(schema, prefix, { personal = [] } = {}) {
  const root = isObject(schema) ? schema : {};
  const properties = isObject(root.properties) ? root.properties : {};
  const required = new Set(Array.isArray(root.required) ? root.required.filter((n) => typeof n === "string") : []);
  // Required fields first (the stored definition's keys are in canonical order).
  const declared = [...Object.keys(properties), ...[...required].filter((n) => !(n in properties))];
  const names = [...declared.filter((n) => required.has(n)), ...declared.filter((n) => !required.has(n))];
  const fields = names.map((name, index) =>
    field(name, isObject(properties[name]) ? properties[name] : {}, required.has(name), prefix + "-f" + index, personalTag(name, personal)));
  const open = root.additionalProperties !== false && root.unevaluatedProperties !== false;
  const extra = open ? extraField(prefix + "-extra", names.length === 0) : null;
  return {
    fields: [...fields.map((f) => f.element), extra?.element],
    read() {
      // Entries, then Object.fromEntries: a member named "__proto__" stays a member.
      const entries = [];
      const errors = [];
      if (extra) {
        const parsed = extra.read();
        if (parsed.error) errors.push(parsed.error);
        else entries.push(...Object.entries(parsed.value));
      }
      for (const f of fields) {
        const got = f.read();
        if (got.error) errors.push(f.name + ": " + got.error);
        else if (got.present) entries.push([f.name, got.value]);
        else if (f.required) errors.push(f.name + ": required");
      }
      return { value: Object.fromEntries(entries), errors };
    },
  };
}

function field(name, schema, required, id, tag) {
  const type = simpleType(schema);
  const label = h("label", { for: id }, name, required ? h("span", { class: "required", title: "required" }, " *") : null, tag);
  const hint = schema.description ? h("small", { class: "muted" }, String(schema.description)) : null;
  let control;
  let read;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) {
    const options = schema.enum.map((v, i) => h("option", { value: String(i) }, JSON.stringify(v)));
    control = h("select", { id, name }, h("option", { value: "" }, "—"), options);
    read = () => (control.value === "" ? absent() : present(schema.enum[Number(control.value)]));
  } else if (type === "boolean") {
    control = h("select", { id, name }, h("option", { value: "" }, "—"), h("option", { value: "true" }, "true"), h("option", { value: "false" }, "false"));
    read = () => (control.value === "" ? absent() : present(control.value === "true"));
  } else if (type === "string") {
    control = h("input", { id, name, type: "text", autocomplete: "off", maxlength: schema.maxLength, placeholder: schema.format ?? null });
    read = () => (control.value === "" ? absent() : checkString(control.value, schema));
  } else if (type === "number" || type === "integer") {
    control = h("input", { id, name, type: "text", inputmode: type === "integer" ? "numeric" : "decimal", autocomplete: "off" });
    read = () => (control.value.trim() === "" ? absent() : parseNumber(control.value.trim(), type, schema));
  } else {
    control = h("textarea", { id, name, rows: 3, spellcheck: "false", placeholder: "JSON" });
    read = () => (control.value.trim() === "" ? absent() : parseJson(control.value));
  }
  const kind = Array.isArray(schema.enum) ? "one of" : type ?? "JSON";
  const element = h("div", { class: "field" }, label, control, h("small", { class: "muted" }, kind), hint);
  return { name, required, element, read };
}

function extraField(id, alone) {
  const control = h("textarea", { id, name: "extra", rows: 3, spellcheck: "false", placeholder: "{}" });
  const element = h("div", { class: "field wide" },
    h("label", { for: id }, alone ? "Input (a JSON object)" : "Other input members (a JSON object)"), control);
  return {
    element,
    read() {
      if (control.value.trim() === "") return { value: {} };
      const got = parseJson(control.value);
      if (got.error) return { error: "input: " + got.error };
      if (!isObject(got.value)) return { error: "input: must be a JSON object" };
      return { value: got.value };
    },
  };
}

/** The tag for property `name`: "personal" when it is a personal field itself, and
 * naming the parts when only fields inside it are (a nested pointer such as
 * /address/street falls in the JSON field of `address`). */
function personalTag(name, personal) {
  const top = "/" + name.replace(/~/g, "~0").replace(/\//g, "~1");
  if (personal.includes(top)) {
    return [" ", h("span", { class: "tag personal", title: "kept off the signed record: only a salted digest is signed" }, "personal")];
  }
  const inside = personal.filter((p) => p.startsWith(top + "/"));
  if (inside.length === 0) return null;
  return [" ", h("span", { class: "tag personal", title: "kept off the signed record: only a salted digest of each is signed" },
    "personal: " + inside.map((p) => p.slice(top.length)).join(", "))];
}

/** The one JSON type a schema names, if it names exactly one (or one besides null). */
function simpleType(schema) {
  if (typeof schema.type === "string") return schema.type;
  if (Array.isArray(schema.type)) {
    const types = schema.type.filter((t) => t !== "null");
    if (types.length === 1) return types[0];
  }
  if (typeof schema.const === "string") return "string";
  return null;
}

function checkString(text, schema) {
  const length = [...text].length;
  if (typeof schema.minLength === "number" && length < schema.minLength) return failed("at least " + schema.minLength + " characters");
  if (typeof schema.maxLength === "number" && length > schema.maxLength) return failed("at most " + schema.maxLength + " characters");
  if (typeof schema.pattern === "string") {
    let pattern = null;
    try {
      pattern = new RegExp(schema.pattern, "u");
    } catch {
      // a pattern JavaScript cannot compile is left to the engine
    }
    if (pattern && !pattern.test(text)) return failed("must match " + schema.pattern);
  }
  return present(text);
}

const NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;

function parseNumber(text, type, schema) {
  if (!NUMBER.test(text)) return failed("not a number");
  const value = Number(text);
  if (!Number.isFinite(value)) return failed("out of range");
  if (type === "integer" && !Number.isInteger(value)) return failed("must be an integer");
  if (Number.isInteger(value) && !Number.isSafeInteger(value)) return failed("beyond ±2^53, not exact in JSON");
  if (typeof schema.minimum === "number" && value < schema.minimum) return failed("at least " + schema.minimum);
  if (typeof schema.maximum === "number" && value > schema.maximum) return failed("at most " + schema.maximum);
  return present(value);
}

function parseJson(text) {
  try {
    return present(JSON.parse(text));
  } catch (error) {
    return failed("not valid JSON (" + error.message + ")");
  }
}

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

const present = (value) => ({ present: true, value });
const absent = () => ({ present: false });
const failed = (error) => ({ error });
