# syntax=docker/dockerfile:1

# Build a static binary: no cgo, so it runs on an image without a libc.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/membership . \
 && mkdir -p /out/data

# distroless/static holds CA certificates, tzdata and a nonroot user, nothing else.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/membership /membership
# The data directory for -data-dir /data, owned by the nonroot user (65532) so
# that a named volume mounted there is writable.
COPY --from=build --chown=65532:65532 /out/data /data
VOLUME /data
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/membership"]
