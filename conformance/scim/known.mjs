// Disagreements that are a documented choice of the service or a fault of
// a third-party package, each with why: run.mjs reports them and passes.
// Any other disagreement fails the run.
export const known = [
  {
    match: /^unimplemented: /,
    why: "the service implements eq of a string, joined by and (docs/scim.md); the grammar's other filters are 400 invalidFilter",
  },
  {
    match: /^service refuses "" with 400 invalidValue, not 400 invalidFilter$/,
    why: "the service's choice: an empty query parameter, filter= as any other, is 400 invalidValue",
  },
  {
    match: /^\/Schemas Group displayName\.caseExact: true, scimmy's schema false$/,
    why: "the service's choice: a group's displayName is compared exactly (docs/scim.md), and /Schemas says so",
  },
  {
    match: /^\/Schemas Group members\.display\.mutability: "readOnly", scimmy's schema "immutable"$/,
    why: "the service's choice: a member's display is its nickname, which the service sets and a write of members does not; RFC 7643 8.7.1 has no display, scimmy adds it as immutable",
  },
  {
    match: /^GET \/ServiceProviderConfig: ServiceProviderConfig authenticationSchemes\[0\]\.primary: not a sub-attribute/,
    why: "scimmy: its ServiceProviderConfig schema lacks primary, a sub-attribute of every multi-valued attribute (RFC 7643 2.4) that RFC 7643 8.5's example sends",
  },
  {
    match: /^Group PATCH "ADD members of a member already in": scim-patch refuses it/,
    why: "scim-patch: takes op as add, Add, replace, Replace, remove and Remove only; the service takes it in any case, as identity providers send it",
  },
  {
    match: /^scim-query-filter-parser refuses "urn:ietf:params:scim:schemas:core:2\.0:(User:userName|Group:displayName) eq /,
    why: "scim-query-filter-parser: its URI rule takes the attribute's name too, and it does not backtrack (RFC 7644 3.4.2.2: attrPath = [URI \":\"] ATTRNAME)",
  },
  {
    match: /^scim-query-filter-parser refuses "not ?\(userName eq \\"a\\"\)", which the grammar accepts$/,
    why: "scim-query-filter-parser: refuses not (…), with a space after not as RFC 7644's examples have it and without as its ABNF has it",
  },
  {
    match: /^scim2-parse-filter accepts "(userName eq \\"a\\\\x\\"|1userName eq \\"a\\"|userName  eq \\"a\\"| userName eq \\"a\\"|userName eq \\"a\\" |userName\\teq \\"a\\"|displayName eq \\"x\\" and  id eq \\"y\\")", which the grammar refuses$/,
    why: "scim2-parse-filter: a tokenizer that skips any whitespace, takes an attribute name starting with a digit and a string with an invalid escape",
  },
  {
    match: /^scim2\/filter-parser refuses "userName eq \\"caf\\\\u00e9\\"", which the grammar accepts$/,
    why: "github.com/scim2/filter-parser/v2: refuses a \\u escape in a string, which RFC 7644's compValue (a JSON string, RFC 7159) takes",
  },
  {
    match: /^scim2\/filter-parser accepts "(userName  eq \\"a\\"|displayName eq \\"x\\" and  id eq \\"y\\")", which the grammar refuses$/,
    why: "github.com/scim2/filter-parser/v2: takes two spaces between the words of a filter",
  },
  {
    match: /^Group PATCH "(Add members \(op in any case\)|ADD members of a member already in)": scimmy PatchOp gives /,
    why: "scimmy's PatchOp: an add of a member already in adds it twice (RFC 7644 3.5.2.1: a value already there SHOULD change nothing)",
  },
  {
    match: /^User PATCH "replace without a path, name with one sub-attribute": scim-patch gives /,
    why: "scim-patch: a replace without a path replaces a complex attribute whole (RFC 7644 3.5.2.3: the sub-attributes the value does not name are left unchanged; with the path name, scim-patch leaves them)",
  },
  {
    match: /^User PATCH "replace name with one sub-attribute": scimmy PatchOp gives /,
    why: "scimmy's PatchOp: a replace with the path of a complex attribute replaces it whole (RFC 7644 3.5.2.3: the sub-attributes the value does not name are left unchanged; without a path, scimmy leaves them)",
  },
];
