// A corpus of PATCH requests, each applied to the resource read back
// before it by two implementations of RFC 7644 3.5.2 (scim-patch, and
// scimmy's PatchOp) and by the service, and the results compared on the
// attributes the service keeps.
import { scimPatch } from "scim-patch";
import SCIMMY from "scimmy";
import { checker } from "./sequence.mjs";

const USER = "urn:ietf:params:scim:schemas:core:2.0:User";
const GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group";
const PATCHOP = "urn:ietf:params:scim:api:messages:2.0:PatchOp";

// kept projects a resource on the attributes the service keeps: members
// as a sorted list of values (their display is the member's nickname,
// which a PATCH of a group does not set), emails as their values (the
// service keeps one address, the primary one), meta left aside.
export function kept(kind, r) {
  if (kind === "Group") {
    return { id: r.id, displayName: r.displayName, externalId: r.externalId, members: (r.members ?? []).map((m) => String(m.value)).sort() };
  }
  const emails = r.emails ?? [];
  const email = emails.find((m) => m.primary === true) ?? emails.find((m) => m.type === "work") ?? emails[0];
  const name = r.name && (r.name.givenName !== undefined || r.name.familyName !== undefined) ? { givenName: r.name.givenName, familyName: r.name.familyName } : undefined;
  return { id: r.id, userName: r.userName, externalId: r.externalId, displayName: r.displayName, name, email: email?.value, active: r.active };
}

const groupCases = (u) => [
  ["add members, a value array", [{ op: "add", path: "members", value: [{ value: u[3] }] }]],
  ["Add members (op in any case)", [{ op: "Add", path: "members", value: [{ value: u[3] }, { value: u[0] }] }]],
  ["ADD members of a member already in", [{ op: "ADD", path: "members", value: [{ value: u[1] }] }]],
  ["remove members with a value array (Entra)", [{ op: "remove", path: "members", value: [{ value: u[1] }] }]],
  ["Remove members with two values", [{ op: "Remove", path: "members", value: [{ value: u[0] }, { value: u[2] }] }]],
  ["remove members[value eq] (Okta)", [{ op: "remove", path: `members[value eq "${u[1]}"]` }]],
  ["remove members[value eq] of a non-member", [{ op: "remove", path: `members[value eq "${u[3]}"]` }]],
  ["remove members without a value", [{ op: "remove", path: "members" }]],
  ["replace members", [{ op: "replace", path: "members", value: [{ value: u[3] }] }]],
  ["replace displayName", [{ op: "replace", path: "displayName", value: "renamed" }]],
  ["Replace of several attributes without a path (Okta)", [{ op: "Replace", value: { id: "{id}", displayName: "renamed", externalId: "x-2" } }]],
  ["add without a path, displayName", [{ op: "add", value: { displayName: "added" } }]],
  ["add without a path, members", [{ op: "add", value: { members: [{ value: u[3] }] } }]],
  ["remove externalId", [{ op: "remove", path: "externalId" }]],
  ["several operations in one PATCH", [
    { op: "add", path: "members", value: [{ value: u[3] }] },
    { op: "remove", path: `members[value eq "${u[0]}"]` },
    { op: "replace", path: "displayName", value: "several" }]],
];

const userCases = () => [
  ["replace without a path, active false (Okta)", [{ op: "replace", value: { active: false } }]],
  ["Replace active (Entra)", [{ op: "Replace", path: "active", value: false }]],
  ["replace displayName", [{ op: "replace", path: "displayName", value: "Nick" }]],
  ["Add displayName", [{ op: "Add", path: "displayName", value: "Nick" }]],
  ["replace name.familyName", [{ op: "replace", path: "name.familyName", value: "Family" }]],
  ["replace without a path, name.givenName", [{ op: "replace", value: { "name.givenName": "Given" } }]],
  ["replace without a path, name with one sub-attribute", [{ op: "replace", value: { name: { givenName: "Given" } } }]],
  ["replace name with one sub-attribute", [{ op: "replace", path: "name", value: { familyName: "Family" } }]],
  ['replace emails[type eq "work"].value (Entra)', [{ op: "replace", path: 'emails[type eq "work"].value', value: "new@example.com" }]],
  ["add externalId", [{ op: "add", path: "externalId", value: "ext-new" }]],
  ["remove externalId", [{ op: "remove", path: "externalId" }]],
  ["remove name.givenName", [{ op: "remove", path: "name.givenName" }]],
  ["replace of several attributes without a path", [{ op: "replace", value: { displayName: "D", externalId: "E", userName: "renamed-{n}@example.com", active: false } }]],
  ["replace userName", [{ op: "replace", path: "userName", value: "other-{n}@example.com" }]],
];

// fill puts the resource's id and a case's number where a case says so.
const fill = (ops, id, n) => JSON.parse(JSON.stringify(ops).replaceAll("{id}", id).replaceAll("{n}", String(n)));

// references applies ops to before with each reference implementation:
// scim-patch, and scimmy's PatchOp; it returns, for each, the resource
// patched or the error that refused it.
async function references(kind, before, ops) {
  // A member's display is its nickname, which a PATCH of a group does not
  // set: the references are given the members as the PATCH names them.
  const given = structuredClone(before);
  if (Array.isArray(given.members)) given.members = given.members.map((m) => ({ value: m.value }));
  const out = {};
  try {
    out["scim-patch"] = { patched: scimPatch(structuredClone(given), ops) };
  } catch (err) {
    out["scim-patch"] = { refused: err.message };
  }
  try {
    const message = new SCIMMY.Messages.PatchOp({ schemas: [PATCHOP], Operations: ops });
    const resource = new SCIMMY.Schemas[kind](structuredClone(given), "out");
    out["scimmy PatchOp"] = { patched: JSON.parse(JSON.stringify((await message.apply(resource)) ?? resource)) };
  } catch (err) {
    out["scimmy PatchOp"] = { refused: err.message };
  }
  return out;
}

// one applies ops to the resource at path with the references and the
// service; it returns the disagreements.
async function one(call, send, kind, path, name, ops) {
  const where = `${kind} PATCH "${name}"`;
  const before = (await call("GET", path, undefined, { status: 200, kind })).json;
  const refs = await references(kind, before, ops);
  const reply = await send("PATCH", path, { schemas: [PATCHOP], Operations: ops });
  const after = reply.status < 400 ? (await call("GET", path, undefined, { status: 200, kind })).json : undefined;
  const got = after && JSON.stringify(kept(kind, after));
  const out = [];
  for (const [ref, { patched, refused }] of Object.entries(refs)) {
    if (refused !== undefined && reply.status < 400) out.push(`${where}: ${ref} refuses it (${refused}), the service answers ${reply.status}`);
    if (refused === undefined && reply.status >= 400) out.push(`${where}: ${ref} applies it, the service answers ${reply.status} ${JSON.stringify(reply.json)}`);
    if (refused === undefined && after) {
      const want = JSON.stringify(kept(kind, patched));
      if (want !== got) out.push(`${where}: ${ref} gives ${want}, the service ${got}`);
    }
  }
  if (reply.status === 200 && JSON.stringify(kept(kind, reply.json)) !== got) out.push(`${where}: the PATCH's reply ${JSON.stringify(kept(kind, reply.json))} is not what a GET reads after, ${got}`);
  return out;
}

// run creates the users and groups the corpus needs and applies each case
// to a resource of its own.
export async function run(send) {
  const out = [];
  const call = checker(send, out);
  const user = (name) => ({
    schemas: [USER], userName: name, externalId: `ext-${name}`, displayName: name,
    name: { givenName: "G", familyName: "F" }, emails: [{ primary: true, type: "work", value: name }], active: true,
  });
  const u = [];
  for (let i = 0; i < 4; i++) u.push((await call("POST", "/Users", user(`member-${i}@example.com`), { status: 201, kind: "User" })).json.id);
  let n = 0;
  for (const [name, ops] of groupCases(u)) {
    n++;
    const g = (await call("POST", "/Groups", { schemas: [GROUP], displayName: `patch-${n}`, externalId: `x-${n}`, members: u.slice(0, 3).map((value) => ({ value })) }, { status: 201, kind: "Group" })).json;
    if (!g?.id) continue;
    out.push(...await one(call, send, "Group", `/Groups/${encodeURIComponent(g.id)}`, name, fill(ops, g.id, n)));
  }
  for (const [name, ops] of userCases()) {
    n++;
    const r = (await call("POST", "/Users", user(`patched-${n}@example.com`), { status: 201, kind: "User" })).json;
    if (!r?.id) continue;
    out.push(...await one(call, send, "User", `/Users/${r.id}`, name, fill(ops, r.id, n)));
  }
  return out;
}
