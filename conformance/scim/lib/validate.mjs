// Checks the service's replies against scimmy's definitions of RFC 7643's
// core schemas and RFC 7644's messages. scimmy's own coercion forgives
// much (it drops undeclared attributes, folds names' case), so each reply
// is also walked attribute by attribute against the same definitions.
import SCIMMY from "scimmy";

const ERROR = "urn:ietf:params:scim:api:messages:2.0:Error";
const LIST = "urn:ietf:params:scim:api:messages:2.0:ListResponse";
const SCIM_JSON = "application/scim+json";

export const schemaOf = {
  User: SCIMMY.Schemas.User,
  Group: SCIMMY.Schemas.Group,
  ResourceType: SCIMMY.Schemas.ResourceType,
  ServiceProviderConfig: SCIMMY.Schemas.ServiceProviderConfig,
};

// walk returns the violations of value against the attribute attr, at path.
function walk(attr, value, path, out) {
  const { multiValued, canonicalValues, returned } = attr.config;
  if (returned === "never" || returned === false) out.push(`${path}: returned "never" in the schema, but returned`);
  if (multiValued) {
    if (!Array.isArray(value)) return out.push(`${path}: multi-valued, but ${JSON.stringify(value)} is not an array`);
    if (attr.type === "complex" && value.filter((v) => v?.primary === true).length > 1) out.push(`${path}: primary true more than once`);
    value.forEach((v, i) => single(attr, v, `${path}[${i}]`, out));
  } else {
    if (Array.isArray(value)) return out.push(`${path}: single-valued, but an array`);
    single(attr, value, path, out);
  }
  if (Array.isArray(canonicalValues) && attr.type !== "complex") {
    for (const v of [value].flat()) if (!canonicalValues.includes(v)) out.push(`${path}: ${JSON.stringify(v)} is not one of ${canonicalValues.join(", ")}`);
  }
}

function single(attr, v, path, out) {
  if (v === null) return out.push(`${path}: null (RFC 7643 2.5: an unassigned attribute is left out)`);
  switch (attr.type) {
    case "string": case "reference": case "binary":
      if (typeof v !== "string") out.push(`${path}: ${attr.type}, but ${JSON.stringify(v)}`);
      return;
    case "boolean":
      if (typeof v !== "boolean") out.push(`${path}: boolean, but ${JSON.stringify(v)}`);
      return;
    case "integer": case "decimal":
      if (typeof v !== "number" || (attr.type === "integer" && !Number.isInteger(v))) out.push(`${path}: ${attr.type}, but ${JSON.stringify(v)}`);
      return;
    case "dateTime":
      if (typeof v !== "string" || !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(v)) out.push(`${path}: dateTime (xsd:dateTime), but ${JSON.stringify(v)}`);
      return;
    case "complex": {
      if (typeof v !== "object" || Array.isArray(v)) return out.push(`${path}: complex, but ${JSON.stringify(v)}`);
      for (const [k, sub] of Object.entries(v)) {
        const def = attr.subAttributes.find((s) => s.name === k);
        if (!def) {
          const folded = attr.subAttributes.find((s) => s.name.toLowerCase() === k.toLowerCase());
          out.push(folded ? `${path}.${k}: named ${folded.name} in the schema` : `${path}.${k}: not a sub-attribute of ${attr.name} in the schema`);
        } else walk(def, sub, `${path}.${k}`, out);
      }
    }
  }
}

// resource returns the violations of r, a resource of the schema named
// kind. full: r was asked for whole, so the required attributes must be
// there and scimmy's coercion must take it.
export function resource(kind, r, full, where) {
  const out = [];
  const schema = schemaOf[kind];
  const def = schema.definition;
  if (typeof r !== "object" || r === null || Array.isArray(r)) return [`${where}: not an object`];
  if (!Array.isArray(r.schemas) || !r.schemas.includes(def.id)) out.push(`schemas: ${JSON.stringify(r.schemas)} does not name ${def.id}`);
  for (const [k, v] of Object.entries(r)) {
    const attr = def.attributes.find((a) => a.name === k);
    if (!attr) {
      const folded = def.attributes.find((a) => a.name && a.name.toLowerCase() === k.toLowerCase());
      out.push(folded ? `${k}: named ${folded.name} in the schema` : `${k}: not an attribute of ${def.name} (nor an extension the resource names)`);
      continue;
    }
    walk(attr, v, k, out);
  }
  for (const a of def.attributes) {
    if (!a.name) continue;
    const always = a.config.returned === "always";
    if ((always || (full && a.config.required)) && r[a.name] === undefined && !(kind !== "User" && kind !== "Group" && a.name === "id")) {
      out.push(`${a.name}: ${always ? 'returned "always"' : "required"}, but missing`);
    }
  }
  if (r.meta !== undefined && (kind === "User" || kind === "Group")) {
    if (r.meta.resourceType !== kind) out.push(`meta.resourceType: ${JSON.stringify(r.meta.resourceType)}, not ${kind}`);
    if (typeof r.meta.location === "string" && !r.meta.location.endsWith(`/${kind}s/${encodeURIComponent(r.id)}`)) out.push(`meta.location: ${r.meta.location} is not the resource's URI`);
  }
  if (full) {
    try {
      if (kind === "User" || kind === "Group") new schema(r, "out");
      else def.coerce(r, "out");
    } catch (err) {
      out.push(`scimmy.Schemas.${kind}: ${err.message}`);
    }
  }
  return out.map((v) => `${where}: ${kind} ${v}`);
}

// contentType returns the violation of a reply's Content-Type, if any.
export function contentType(reply, where) {
  if (reply.json === null) return [];
  return reply.type && reply.type.split(";")[0].trim() === SCIM_JSON ? [] : [`${where}: Content-Type ${reply.type}, not ${SCIM_JSON}`];
}

// list returns the violations of a ListResponse of resources of kind,
// asked for from startIndex.
export function list(kind, body, startIndex, full, where) {
  const out = [];
  try {
    new SCIMMY.Messages.ListResponse(body);
  } catch (err) {
    out.push(`${where}: scimmy.Messages.ListResponse: ${err.message}`);
  }
  if (JSON.stringify(body.schemas) !== JSON.stringify([LIST])) out.push(`${where}: ListResponse schemas ${JSON.stringify(body.schemas)}`);
  for (const k of Object.keys(body)) {
    if (!["schemas", "totalResults", "startIndex", "itemsPerPage", "Resources"].includes(k)) out.push(`${where}: ListResponse has ${k}, not an attribute of the message`);
  }
  for (const k of ["totalResults", "startIndex", "itemsPerPage"]) {
    if (!Number.isInteger(body[k])) out.push(`${where}: ListResponse ${k} is ${JSON.stringify(body[k])}, not an integer`);
  }
  const resources = body.Resources ?? [];
  if (body.totalResults > 0 && body.Resources === undefined && body.itemsPerPage > 0) out.push(`${where}: ListResponse without Resources but totalResults ${body.totalResults}`);
  if (body.itemsPerPage !== resources.length) out.push(`${where}: ListResponse itemsPerPage ${body.itemsPerPage}, but ${resources.length} Resources`);
  if (body.startIndex !== startIndex) out.push(`${where}: ListResponse startIndex ${body.startIndex}, asked for ${startIndex}`);
  if (body.totalResults < resources.length) out.push(`${where}: ListResponse totalResults ${body.totalResults} < ${resources.length} Resources`);
  resources.forEach((r, i) => out.push(...resource(kind, r, full, `${where} Resources[${i}]`)));
  return out;
}

// error returns the violations of an error reply of HTTP status status.
export function error(reply, where) {
  const out = contentType(reply, where);
  const body = reply.json;
  if (body === null || typeof body !== "object") return [...out, `${where}: error ${reply.status} without a body`];
  if (JSON.stringify(body.schemas) !== JSON.stringify([ERROR])) out.push(`${where}: Error schemas ${JSON.stringify(body.schemas)}`);
  for (const k of Object.keys(body)) if (!["schemas", "status", "scimType", "detail"].includes(k)) out.push(`${where}: Error has ${k}, not an attribute of the message`);
  if (body.status !== String(reply.status)) out.push(`${where}: Error status ${JSON.stringify(body.status)}, HTTP status ${reply.status}`);
  try {
    const { status, scimType, detail } = body;
    new SCIMMY.Messages.Error({ status, scimType, detail });
  } catch (err) {
    out.push(`${where}: scimmy.Messages.Error: ${err.message}`);
  }
  return out;
}

// selfCheck returns what the checks above miss among replies each known
// to break the schemas: a run whose checks find nothing must not be
// because they look at nothing.
export function selfCheck() {
  const user = { schemas: ["urn:ietf:params:scim:schemas:core:2.0:User"], id: "1", userName: "a", meta: { resourceType: "User", location: "http://h/scim/v2/Users/1" } };
  const bad = [
    ["a user without userName", resource("User", { ...user, userName: undefined }, true, "")],
    ["a user without id", resource("User", { ...user, id: undefined }, false, "")],
    ["an undeclared attribute", resource("User", { ...user, nickname: "x" }, true, "")],
    ["a name in the wrong case", resource("User", { ...user, UserName: "a" }, true, "")],
    ["a boolean as a string", resource("User", { ...user, active: "false" }, true, "")],
    ["emails not an array", resource("User", { ...user, emails: { value: "a@b" } }, true, "")],
    ["two primary emails", resource("User", { ...user, emails: [{ value: "a", primary: true }, { value: "b", primary: true }] }, true, "")],
    ["a password returned", resource("User", { ...user, password: "x" }, true, "")],
    ["a group member's undeclared sub-attribute", resource("Group", { schemas: ["urn:ietf:params:scim:schemas:core:2.0:Group"], id: "g", displayName: "g", members: [{ uid: 1 }] }, true, "")],
    ["a list's itemsPerPage", list("User", { schemas: [LIST], totalResults: 1, startIndex: 1, itemsPerPage: 2, Resources: [user] }, 1, true, "")],
    ["a list's totalResults as a string", list("User", { schemas: [LIST], totalResults: "1", startIndex: 1, itemsPerPage: 1, Resources: [user] }, 1, true, "")],
    ["an error's status as a number", error({ status: 400, type: SCIM_JSON, json: { schemas: [ERROR], status: 400 } }, "")],
    ["an error's scimType for its status", error({ status: 404, type: SCIM_JSON, json: { schemas: [ERROR], status: "404", scimType: "invalidFilter" } }, "")],
    ["an error as application/json", error({ status: 404, type: "application/json", json: { schemas: [ERROR], status: "404" } }, "")],
  ];
  return bad.filter(([, found]) => found.length === 0).map(([what]) => `the checks miss ${what}`);
}
