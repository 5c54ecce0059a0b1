// Compiled with the types openapi-typescript generates from
// httpapi/openapi.json (make clients): tsc fails when a value the document
// types comes out untyped (each @ts-expect-error line must be an error).
import type { components, paths } from "./schema";

type Schemas = components["schemas"];

const users: Schemas["Users"] = [1, "2", [3], [4, "Bob"], { uid: 5, ttl: "4h" }, { uid: 6, expires: null }];
// @ts-expect-error: a tuple is [uid] or [uid, nickname], no longer
const tooLong: Schemas["User"] = [4, "Bob", "Cy"];

const change: Schemas["Change"] = { rev: 7, op: "add", group: "admins", uids: [1], time: "2026-11-24T23:59:01.123Z" };
const rev: number = change.rev;
// @ts-expect-error: op is one of the ops
const badOp: Schemas["Change"]["op"] = "rename";

const member: Schemas["Member"] = { uid: 1, nickname: "" };
const health: paths["/healthz"]["get"]["responses"][200]["content"]["application/json"] = { status: "ok" };
// @ts-expect-error: status is "ok"
const sick: paths["/healthz"]["get"]["responses"][200]["content"]["application/json"] = { status: "sick" };

export { users, tooLong, change, rev, badOp, member, health, sick };
