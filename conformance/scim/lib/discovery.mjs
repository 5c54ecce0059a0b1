// /Schemas: each attribute the service describes, compared with scimmy's
// definition of the same attribute of RFC 7643's core schemas.
import { schemaOf } from "./validate.mjs";

const mutability = (m) => ({ true: "readWrite", false: "readOnly" })[m] ?? m;
const returned = (r) => ({ true: "default", false: "never" })[r] ?? r;

function compare(described, defs, path, out) {
  for (const a of described ?? []) {
    const def = defs.find((d) => d.name === a.name);
    if (!def) {
      out.push(`/Schemas ${path}${a.name}: not an attribute of scimmy's schema`);
      continue;
    }
    const want = {
      type: def.type, multiValued: def.config.multiValued, required: def.config.required, caseExact: def.config.caseExact,
      mutability: mutability(def.config.mutable), returned: returned(def.config.returned), uniqueness: def.config.uniqueness || "none",
    };
    for (const [k, w] of Object.entries(want)) {
      if (a[k] !== undefined && a[k] !== w && !(k === "caseExact" && a.type === "complex")) out.push(`/Schemas ${path}${a.name}.${k}: ${JSON.stringify(a[k])}, scimmy's schema ${JSON.stringify(w)}`);
    }
    compare(a.subAttributes, def.subAttributes ?? [], `${path}${a.name}.`, out);
  }
}

// run reads /Schemas and returns the differences.
export async function run(call) {
  const out = [];
  const list = (await call("GET", "/Schemas", undefined, { status: 200 })).json;
  for (const s of list?.Resources ?? []) {
    const schema = Object.values(schemaOf).find((c) => c.definition.id === s.id);
    if (!schema) {
      out.push(`/Schemas: ${s.id} is not a schema scimmy defines`);
      continue;
    }
    compare(s.attributes, schema.definition.attributes.filter((a) => a.name), `${schema.definition.name} `, out);
  }
  return out;
}
