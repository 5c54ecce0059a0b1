#!/bin/sh
# clients.sh generates clients from httpapi/openapi.json as a new user would,
# with the generators' default settings, in bin/clients/ (git-ignored), and
# compiles them:
#
#   Go:         oapi-codegen (this module's tool) with -generate types,client,
#               and with its default set (types, client, echo server, spec);
#               go build and go vet in a scratch module, with testdata/use.go
#               beside the client.
#   TypeScript: openapi-typescript, then tsc --noEmit --strict with
#               testdata/use.ts; both from npm, pinned in package.json and
#               package-lock.json, installed in bin/clients/npm.
#
# It fails on any generator error, any compile error, and any value the
# generated code leaves untyped (interface{}, any, unknown: see untyped/).
# It also vets and tests untyped/, this module's one package.
# make clients runs it; it needs go, node and npm, and fetches the rest.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
doc=$root/httpapi/openapi.json
gen=$root/clientgen
out=$root/bin/clients

# The versions the generated Go code is compiled with: the runtime and echo
# that oapi-codegen's output imports, and the kin-openapi of the generator.
runtime_version=v1.8.0
echo_version=v4.16.0
kin_version=$(cd "$gen" && go list -m -f '{{.Version}}' github.com/getkin/kin-openapi)

rm -rf "$out/go" "$out/ts"
mkdir -p "$out/go/typesclient" "$out/go/defaults" "$out/ts" "$out/npm"

step() { echo "make clients: $*"; }

for tool in node npm; do
	command -v $tool >/dev/null || {
		echo "make clients: $tool is missing: make clients installs it, or: sudo apt-get install nodejs npm" >&2
		exit 1
	}
done

cd "$gen"
step "oapi-codegen $(go tool oapi-codegen -version | tail -n 1), -generate types,client"
go tool oapi-codegen -generate types,client -package membershipclient -o "$out/go/typesclient/client.go" "$doc"
cp testdata/use.go "$out/go/typesclient/use.go"
step "oapi-codegen, its default set (types,client,server,spec)"
go tool oapi-codegen -package membershipserver -o "$out/go/defaults/server.go" "$doc"
step "go vet and go test of clientgen, then build its untyped checker"
go vet ./...
go test ./untyped
go build -o "$out/untyped" ./untyped

cat >"$out/go/go.mod" <<EOF
module example.com/membershipclients

go 1.25.0

require (
	github.com/getkin/kin-openapi $kin_version
	github.com/labstack/echo/v4 $echo_version
	github.com/oapi-codegen/runtime $runtime_version
)
EOF
cd "$out/go"
step "go build and go vet of both, in a scratch module (bin/clients/go)"
go build -mod=mod ./...
go vet -mod=mod ./...

# npm ci only when package.json or package-lock.json changed since the last
# install.
cd "$out/npm"
if ! cmp -s "$gen/package.json" package.json || ! cmp -s "$gen/package-lock.json" package-lock.json ||
	[ ! -d node_modules ]; then
	step "npm ci in bin/clients/npm (openapi-typescript and typescript, as package-lock.json pins them)"
	cp "$gen/package.json" "$gen/package-lock.json" .
	npm ci --no-audit --no-fund --loglevel=error
fi
step "openapi-typescript (it prints its version)"
node_modules/.bin/openapi-typescript "$doc" -o "$out/ts/schema.ts"
cp "$gen/testdata/use.ts" "$out/ts/use.ts"
step "$(node_modules/.bin/tsc --version) --noEmit --strict"
node_modules/.bin/tsc --noEmit --strict "$out/ts/schema.ts" "$out/ts/use.ts"

# OpenAPIDocument, the body of GET /openapi.json, is any JSON object: its
# schema is the OpenAPI Specification's, not this document's.
step "untyped values in the generated code (none allowed but OpenAPIDocument)"
"$out/untyped" -allow OpenAPIDocument "$out/go/typesclient/client.go" "$out/go/defaults/server.go" "$out/ts/schema.ts"
step "both clients generated and compiled, every value typed"
