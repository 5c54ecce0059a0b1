# syntax=docker/dockerfile:1

# Build a static binary: no cgo, so it runs on an image without a libc.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# What the binary says it is (-version, the start log, /metrics). The build
# context has no .git (.dockerignore), so go build cannot read the commit:
# make docker passes git's version and commit as build arguments. Without
# them the binary says version (devel), revision unknown.
ARG VERSION=
ARG REVISION=
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X example.com/groupmembership/internal/buildinfo.version=${VERSION} -X example.com/groupmembership/internal/buildinfo.revision=${REVISION}" \
      -o /out/membership . \
 && mkdir -p -m 0700 /out/rootfs/data

# distroless/static holds CA certificates, tzdata and a nonroot user, nothing else.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/membership /membership
# The data directory for -data-dir /data: 0700 and owned by the nonroot user
# (65532), so that a volume mounted there (docker run -v NAME:/data), which
# starts as a copy of it, is the service's alone, as it wants it. Copied as
# what /out/rootfs holds: COPY of a directory copies its content, and makes
# the destination with mode 0755. No VOLUME line: a run in memory makes no
# anonymous volume.
COPY --from=build --chown=65532:65532 /out/rootfs/ /
USER nonroot:nonroot
EXPOSE 8080
# The image has no shell and no curl: the binary probes itself. A path alone
# asks 127.0.0.1:8080, or the admin listener when MEMBERSHIP_ADMIN_ADDR sets
# one (docker run -e MEMBERSHIP_ADMIN_ADDR=:9090), which clients never
# crowd out.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["/membership", "-probe", "/readyz"]
ENTRYPOINT ["/membership"]
