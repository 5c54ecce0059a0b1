// Filters: every filter the service's tests and docs send, and a corpus
// of filters the RFC 7644 3.4.2.2 grammar accepts and refuses, each parsed
// by two filter parsers and sent to the service.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { parse } from "scim2-parse-filter";
import { compileFilter } from "scim-query-filter-parser";
import { checker } from "./sequence.mjs";

const USER = "urn:ietf:params:scim:schemas:core:2.0:User";
const GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group";

// corpus: [filter, resources, the grammar's verdict, whether the service
// implements it (eq of a string on the attributes it compares, and)].
const VALID = true, INVALID = false, DONE = true, NOT_DONE = false;
export const corpus = [
  ['userName eq "ann"', "Users", VALID, DONE],
  ['UserName EQ "ann"', "Users", VALID, DONE],
  [`${USER}:userName eq "ann"`, "Users", VALID, DONE],
  ['externalId eq "e" and userName eq "ann"', "Users", VALID, DONE],
  ['userName eq "a" AND externalId eq "b"', "Users", VALID, DONE],
  ['userName eq "a \\"quoted\\" name"', "Users", VALID, DONE],
  ['userName eq "caf\\u00e9"', "Users", VALID, DONE],
  ['userName eq ""', "Users", VALID, DONE],
  ['id eq "1"', "Users", VALID, DONE],
  ['displayName eq "x"', "Groups", VALID, DONE],
  ['members eq "1"', "Groups", VALID, DONE],
  ['members.value eq "1"', "Groups", VALID, DONE],
  ['id eq "g" and members eq "1"', "Groups", VALID, DONE],
  [`${GROUP}:displayName eq "x"`, "Groups", VALID, DONE],
  ['userName ne "a"', "Users", VALID, NOT_DONE],
  ['userName co "a"', "Users", VALID, NOT_DONE],
  ['userName sw "a"', "Users", VALID, NOT_DONE],
  ['userName ew "a"', "Users", VALID, NOT_DONE],
  ['userName pr', "Users", VALID, NOT_DONE],
  ['meta.lastModified gt "2011-05-13T04:42:34Z"', "Users", VALID, NOT_DONE],
  ['userName eq "a" or userName eq "b"', "Users", VALID, NOT_DONE],
  ['not (userName eq "a")', "Users", VALID, NOT_DONE],
  ['not(userName eq "a")', "Users", VALID, NOT_DONE],
  ['(userName eq "a")', "Users", VALID, NOT_DONE],
  ['emails[type eq "work"]', "Users", VALID, NOT_DONE],
  ['emails[type eq "work" and value co "@example.com"]', "Users", VALID, NOT_DONE],
  ['userName eq null', "Users", VALID, NOT_DONE],
  ['userName eq 42', "Users", VALID, NOT_DONE],
  ['active eq true', "Users", VALID, NOT_DONE],
  ['name.familyName eq "x"', "Users", VALID, NOT_DONE],
  ['displayName eq "x"', "Users", VALID, NOT_DONE],
  ['userName eq "a" and (externalId eq "b" or externalId eq "c")', "Users", VALID, NOT_DONE],
  ['', "Users", INVALID],
  ['userName', "Users", INVALID],
  ['userName eq', "Users", INVALID],
  ['userName eq ann', "Users", INVALID],
  ["userName eq 'ann'", "Users", INVALID],
  ['userName eq "unterminated', "Users", INVALID],
  ['userName eq "a\\x"', "Users", INVALID],
  ['userName === "a"', "Users", INVALID],
  ['eq "a"', "Users", INVALID],
  ['1userName eq "a"', "Users", INVALID],
  ['user name eq "a"', "Users", INVALID],
  ['userName eq "a" and', "Users", INVALID],
  ['userName eq "a" andd userName eq "b"', "Users", INVALID],
  ['userName eq "a" and and userName eq "b"', "Users", INVALID],
  ['userName eq "a"userName eq "b"', "Users", INVALID],
  ['userName  eq "a"', "Users", INVALID],
  [' userName eq "a"', "Users", INVALID],
  ['userName eq "a" ', "Users", INVALID],
  ['userName\teq "a"', "Users", INVALID],
  ['(userName eq "a"', "Users", INVALID],
  ['userName eq "a")', "Users", INVALID],
  ['userName pr "a"', "Users", INVALID],
  ['emails[type eq "work"', "Users", INVALID],
  ['members eq "1" and', "Groups", INVALID],
  ['displayName eq "x" and  id eq "y"', "Groups", INVALID],
];

// fromRepo returns the filters the service's SCIM tests and docs send,
// each as [filter, resources].
export function fromRepo(root) {
  const found = new Map();
  const add = (f, resources) => found.set(`${resources} ${f.replace(/\{\w+\}/g, "1")}`, [f.replace(/\{\w+\}/g, "1"), resources]);
  const dir = join(root, "httpapi/scim/scimtest");
  for (const f of readdirSync(dir).filter((f) => f.endsWith(".go"))) {
    for (const m of readFileSync(join(dir, f), "utf8").matchAll(/filtered\("\/scim\/v2\/(\w+)", `([^`]*)`/g)) add(m[2], m[1]);
  }
  const texts = [join(root, "docs/scim.md"), ...readdirSync(join(dir, "testdata")).map((f) => join(dir, "testdata", f))].map((p) => readFileSync(p, "utf8"));
  for (const line of texts.join("\n").split("\n")) {
    const resources = /\/(Users|Groups)\b/.exec(line)?.[1];
    if (!resources) continue;
    // A URL's query, its spaces encoded (the prose's filter=userName eq "…" is not one).
    for (const m of line.matchAll(/filter=([^&"'\s]*(%20|\+)[^&"'\s]*)/g)) add(decodeURIComponent(m[1].replaceAll("+", " ")), resources);
    for (const m of line.matchAll(/--data-urlencode 'filter=([^']*)'/g)) add(m[1], resources);
  }
  return [...found.values()].sort();
}

// verdicts returns, for each filter, whether each parser parses it: the
// two from npm, and github.com/scim2/filter-parser/v2 when goParser, the
// path of conformance/scim/goparser built, is given.
function verdicts(fs, goParser) {
  const go = goParser ? JSON.parse(execFileSync(goParser, { input: JSON.stringify(fs), timeout: 10_000 })) : [];
  return new Map(fs.map((f, i) => {
    const out = {};
    try { parse(f); out["scim2-parse-filter"] = true; } catch { out["scim2-parse-filter"] = false; }
    try { compileFilter(f); out["scim-query-filter-parser"] = true; } catch { out["scim-query-filter-parser"] = false; }
    if (goParser) out["scim2/filter-parser"] = go[i];
    return [f, out];
  }));
}

// run returns the disagreements: between the grammar's verdict and a
// parser's (the parser's fault), and between it and the service's.
export async function run(send, root, goParser) {
  const out = [];
  const call = checker(send, out);
  const q = (f) => `filter=${encodeURIComponent(f)}`;
  // What the tests and docs send: a parser must take what the service
  // takes; what the service refuses and the grammar takes is unimplemented.
  const repo = fromRepo(root);
  const parsed = verdicts([...repo.map(([f]) => f), ...corpus.map(([f]) => f)], goParser);
  for (const [f, resources] of repo) {
    const reply = await send("GET", `/${resources}?${q(f)}`);
    const parsers = parsed.get(f);
    if (reply.status === 200) {
      for (const [parser, ok] of Object.entries(parsers)) if (!ok) out.push(`${parser} refuses ${JSON.stringify(f)}, which the service's tests or docs send and it takes`);
    } else if (reply.json?.scimType !== "invalidFilter") {
      out.push(`service refuses ${JSON.stringify(f)} on /${resources} with ${reply.status} ${reply.json?.scimType}, not 400 invalidFilter`);
    } else if (parsers["scim-query-filter-parser"]) {
      out.push(`unimplemented: ${JSON.stringify(f)} on /${resources} is 400 invalidFilter`);
    }
  }
  for (const [f, resources, valid, done] of corpus) {
    for (const [parser, ok] of Object.entries(parsed.get(f))) {
      if (ok !== valid) out.push(`${parser} ${ok ? "accepts" : "refuses"} ${JSON.stringify(f)}, which the grammar ${valid ? "accepts" : "refuses"}`);
    }
    const reply = await send("GET", `/${resources}?${q(f)}`);
    const accepted = reply.status === 200;
    if (valid && done && !accepted) out.push(`service refuses ${JSON.stringify(f)} (${reply.status} ${reply.json?.scimType}), a filter it implements`);
    if (valid && !done) {
      if (accepted) out.push(`service accepts ${JSON.stringify(f)}, which the corpus says it does not implement: update the corpus`);
      else if (reply.json?.scimType !== "invalidFilter") out.push(`service refuses ${JSON.stringify(f)} with ${reply.status} ${reply.json?.scimType}, not 400 invalidFilter`);
      else out.push(`unimplemented: ${JSON.stringify(f)} on /${resources} is 400 invalidFilter`);
    }
    if (!valid && accepted) out.push(`service accepts ${JSON.stringify(f)}, which the grammar refuses`);
    if (!valid && !accepted && reply.json?.scimType !== "invalidFilter") out.push(`service refuses ${JSON.stringify(f)} with ${reply.status} ${reply.json?.scimType}, not 400 invalidFilter`);
    await call("GET", `/${resources}?${q(f)}`, undefined, accepted ? { status: 200, list: resources.slice(0, -1) } : { status: 400 });
  }
  return out;
}
