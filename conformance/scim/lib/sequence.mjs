// A realistic provisioning sequence, as Okta and Entra ID send it, with
// every reply checked by validate.mjs.
import * as v from "./validate.mjs";
import * as discovery from "./discovery.mjs";

const USER = "urn:ietf:params:scim:schemas:core:2.0:User";
const GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group";
const PATCHOP = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
const patch = (...Operations) => ({ schemas: [PATCHOP], Operations });

// checker returns call(method, path, body, want): the reply of a request,
// whose violations (and a status other than want.status) it adds to out.
export function checker(send, out) {
  return async function call(method, path, body, want) {
    const where = `${method} ${path}`;
    const reply = await send(method, path, body);
    if (reply.status !== want.status) {
      out.push(`${where}: status ${reply.status}, want ${want.status}: ${JSON.stringify(reply.json)}`);
      return reply;
    }
    if (reply.status >= 400) {
      out.push(...v.error(reply, where));
      if (want.scimType !== undefined && reply.json?.scimType !== want.scimType) out.push(`${where}: scimType ${reply.json?.scimType}, want ${want.scimType}`);
      return reply;
    }
    out.push(...v.contentType(reply, where));
    if (want.list) out.push(...v.list(want.list, reply.json, want.startIndex ?? 1, !want.partial, where));
    else if (want.kind) out.push(...v.resource(want.kind, reply.json, !want.partial, where));
    else if (reply.status === 204 && reply.json !== null) out.push(`${where}: 204 with a body`);
    return reply;
  };
}

const oktaUser = (name, given, family) => ({
  schemas: [USER], userName: name, name: { givenName: given, familyName: family },
  emails: [{ primary: true, value: name, type: "work" }], displayName: `${given} ${family}`,
  locale: "en-US", externalId: `00u${given}`, groups: [], password: "1mz050nq", active: true,
});
const entraUser = (name) => ({
  schemas: [USER, "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"],
  externalId: `ext-${name}`, userName: name, active: true,
  emails: [{ primary: true, type: "work", value: `${name}@example.com` }],
  meta: { resourceType: "User" }, name: { formatted: "g f", familyName: "f", givenName: "g" }, roles: [],
});

// run sends the sequence; it returns the violations found.
export async function run(send) {
  const out = [];
  const call = checker(send, out);
  const q = (f, more = "") => `filter=${encodeURIComponent(f)}${more}`;

  await call("GET", "/ServiceProviderConfig", undefined, { status: 200, kind: "ServiceProviderConfig" });
  await call("GET", "/ResourceTypes", undefined, { status: 200, list: "ResourceType" });
  for (const t of ["User", "Group"]) await call("GET", `/ResourceTypes/${t}`, undefined, { status: 200, kind: "ResourceType" });
  out.push(...await discovery.run(call));

  // Okta: look the user up, create it; a second create is a uniqueness error.
  await call("GET", `/Users?${q('userName eq "ann@okta.local"')}&startIndex=1&count=100`, undefined, { status: 200, list: "User" });
  const ann = (await call("POST", "/Users", oktaUser("ann@okta.local", "Ann", "Lee"), { status: 201, kind: "User" })).json;
  await call("POST", "/Users", oktaUser("ANN@okta.local", "Ann", "Lee"), { status: 409, scimType: "uniqueness" });
  const ben = (await call("POST", "/Users", oktaUser("ben@okta.local", "Ben", "Ng"), { status: 201, kind: "User" })).json;
  // Entra: with the enterprise extension's URN in schemas, and meta.
  const cy = (await call("POST", "/Users", entraUser("Cy_ab6490ee"), { status: 201, kind: "User" })).json;
  const ids = [ann.id, ben.id, cy.id];
  await call("GET", `/Users/${ann.id}`, undefined, { status: 200, kind: "User" });
  await call("GET", `/Users?${q('userName eq "CY_AB6490EE"')}`, undefined, { status: 200, list: "User" });
  await call("GET", `/Users?${q('externalId eq "00uBen"')}`, undefined, { status: 200, list: "User" });
  await call("GET", `/Users?${q('userName eq "ann@okta.local"')}&attributes=userName,name.givenName`, undefined, { status: 200, list: "User", partial: true });
  await call("GET", `/Users/${ben.id}?excludedAttributes=meta,active`, undefined, { status: 200, kind: "User", partial: true });

  // Paging: every page is a valid ListResponse, and the pages make the whole.
  const whole = (await call("GET", "/Users", undefined, { status: 200, list: "User" })).json;
  const paged = [];
  for (let i = 1; i <= whole.totalResults; i++) {
    const page = (await call("GET", `/Users?startIndex=${i}&count=1`, undefined, { status: 200, list: "User", startIndex: i })).json;
    if (page.totalResults !== whole.totalResults) out.push(`GET /Users?startIndex=${i}&count=1: totalResults ${page.totalResults}, the whole list's ${whole.totalResults}`);
    paged.push(...(page.Resources ?? []).map((r) => r.id));
  }
  if (JSON.stringify(paged) !== JSON.stringify(whole.Resources.map((r) => r.id))) out.push(`paging /Users one at a time gave ${paged}, the whole list ${whole.Resources.map((r) => r.id)}`);
  await call("GET", `/Users?startIndex=${whole.totalResults + 5}&count=10`, undefined, { status: 200, list: "User", startIndex: whole.totalResults + 5 });
  await call("GET", "/Users?count=0", undefined, { status: 200, list: "User" });

  // Groups: Okta's push (empty, then members), Entra's create with externalId.
  await call("GET", `/Groups?excludedAttributes=members&${q('displayName eq "platform"')}`, undefined, { status: 200, list: "Group", partial: true });
  const okta = (await call("POST", "/Groups", { schemas: [GROUP], displayName: "platform", members: [] }, { status: 201, kind: "Group" })).json;
  const entra = (await call("POST", "/Groups", { schemas: [GROUP, "http://schemas.microsoft.com/2006/11/ResourceManagement/ADSCIM/2.0/Group"], externalId: "8aa1a0c0", displayName: "Entra group", meta: { resourceType: "Group" } }, { status: 201, kind: "Group" })).json;
  const g = `/Groups/${encodeURIComponent(okta.id)}`;
  const e = `/Groups/${encodeURIComponent(entra.id)}`;
  await call("PATCH", g, patch({ op: "add", path: "members", value: ids.map((id) => ({ value: id, display: "x" })) }), { status: 204 });
  await call("PATCH", e, patch({ op: "Add", path: "members", value: ids.map((id) => ({ $ref: null, value: id })) }), { status: 204 });
  await call("GET", g, undefined, { status: 200, kind: "Group" });
  await call("GET", `/Groups?${q(`id eq "${entra.id}" and members eq "${ann.id}"`)}&excludedAttributes=members`, undefined, { status: 200, list: "Group", partial: true });
  await call("GET", `/Groups?${q(`members eq "${ben.id}"`)}`, undefined, { status: 200, list: "Group" });
  await call("GET", `/Groups?${q('externalId eq "8aa1a0c0"')}`, undefined, { status: 200, list: "Group" });
  await call("GET", "/Groups?startIndex=2&count=1", undefined, { status: 200, list: "Group", startIndex: 2 });
  await call("GET", `${g}?attributes=displayName,members`, undefined, { status: 200, kind: "Group", partial: true });
  await call("GET", `${g}?excludedAttributes=members`, undefined, { status: 200, kind: "Group", partial: true });
  // Renames, Okta's remove by filter path, Entra's remove by value, replace of several attributes.
  await call("PATCH", g, patch({ op: "replace", value: { id: okta.id, displayName: "Platform team" } }), { status: 204 });
  await call("PATCH", g, patch({ op: "remove", path: `members[value eq "${ben.id}"]` }), { status: 204 });
  await call("PATCH", e, patch({ op: "Replace", path: "displayName", value: "Entra renamed" }), { status: 204 });
  await call("PATCH", e, patch({ op: "Remove", path: "members", value: [{ $ref: null, value: cy.id }] }), { status: 204 });
  await call("PUT", e, { schemas: [GROUP], displayName: "Entra put", externalId: "8aa1a0c0", members: [{ value: ann.id }] }, { status: 200, kind: "Group" });

  // Users: replace, Entra's PATCH of attributes, Okta's deactivation, Entra's "False".
  await call("PUT", `/Users/${ben.id}`, { ...oktaUser("ben@okta.local", "Benjamin", "Ng"), id: ben.id }, { status: 200, kind: "User" });
  await call("PATCH", `/Users/${cy.id}`, patch(
    { op: "Replace", path: 'emails[type eq "work"].value', value: "new@example.com" },
    { op: "Replace", path: "name.familyName", value: "updated" },
    { op: "Add", path: "displayName", value: "Cy" }), { status: 200, kind: "User" });
  await call("PATCH", `/Users/${ann.id}`, patch({ op: "replace", value: { active: false } }), { status: 200, kind: "User" });
  await call("PATCH", `/Users/${cy.id}`, patch({ op: "Replace", path: "active", value: "False" }), { status: 200, kind: "User" });
  await call("GET", g, undefined, { status: 200, kind: "Group" });
  await call("PATCH", g, patch({ op: "add", path: "members", value: [{ value: ann.id }] }), { status: 400, scimType: "invalidValue" });

  // Errors, each in the SCIM error schema.
  await call("GET", `/Users?${q('userName co "a"')}`, undefined, { status: 400, scimType: "invalidFilter" });
  await call("GET", "/Users/999999", undefined, { status: 404 });
  await call("PATCH", g, patch({ op: "move", path: "displayName", value: "x" }), { status: 400 });
  await call("PATCH", g, patch({ op: "remove", path: 'members[value eq "999999"]' }), { status: 204 });
  await call("POST", "/Users", { schemas: [USER] }, { status: 400 });
  await call("PATCH", `/Users/${ben.id}`, patch({ op: "replace", path: "id", value: "7" }), { status: 400, scimType: "mutability" });

  // Deletes: the user leaves every group; then both are gone.
  await call("DELETE", `/Users/${ben.id}`, undefined, { status: 204 });
  await call("GET", `/Users/${ben.id}`, undefined, { status: 404 });
  await call("DELETE", e, undefined, { status: 204 });
  await call("GET", e, undefined, { status: 404 });
  await call("DELETE", e, undefined, { status: 404 });
  return out;
}
