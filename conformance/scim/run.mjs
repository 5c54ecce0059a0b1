// Runs third-party SCIM packages against a fresh bin/membership: scimmy's
// schemas on every reply of a provisioning sequence and on /Schemas,
// scim-patch's and scimmy's PATCH against the service's, and three filter
// parsers against the service's filters. It exits 1 on any disagreement not listed in known.mjs.
import { start, client } from "./lib/service.mjs";
import * as sequence from "./lib/sequence.mjs";
import * as patches from "./lib/patches.mjs";
import * as filters from "./lib/filters.mjs";
import { known } from "./known.mjs";
import { selfCheck } from "./lib/validate.mjs";

const root = new URL("../../", import.meta.url).pathname;
const binary = process.argv[2] ?? `${root}bin/membership`;
const goParser = process.argv[3]; // conformance/scim/goparser, built; without it, the npm parsers alone
const deadline = setTimeout(() => { console.error("scim-conformance: not done within 120 s"); process.exit(1); }, 120_000);

const missed = selfCheck();
if (missed.length) {
  console.error(`scim-conformance: ${missed.join("; ")}`);
  process.exit(1);
}
const service = await start(binary, 30_000);
let failed = false;
const send = client(service.base, 10_000);
const requests = () => send.count;
try {
  const parts = [
    ["scimmy schemas, provisioning sequence", () => sequence.run(send)],
    ["scim-patch and scimmy's PatchOp, PATCH corpus", () => patches.run(send)],
    ["filter parsers, filter corpus", () => filters.run(send, root, goParser)],
  ];
  for (const [name, part] of parts) {
    const found = await part();
    const why = (f) => known.find((k) => k.match.test(f))?.why;
    const unexpected = found.filter((f) => !why(f));
    console.log(`${name}: ${unexpected.length} disagreements, ${found.length - unexpected.length} known`);
    const byWhy = new Map();
    for (const f of found.filter(why)) byWhy.set(why(f), [...(byWhy.get(why(f)) ?? []), f]);
    for (const [reason, fs] of byWhy) console.log(`  known, ${reason}:\n${fs.map((f) => `    ${f}`).join("\n")}`);
    for (const f of unexpected) console.log(`  FAIL: ${f}`);
    if (unexpected.length) failed = true;
  }
} catch (err) {
  console.error(`scim-conformance: ${err.stack}`);
  failed = true;
} finally {
  await service.stop();
  clearTimeout(deadline);
}
console.log(`scim-conformance: ${failed ? "FAIL" : "ok"} (${requests()} requests)`);
process.exit(failed ? 1 : 0);
