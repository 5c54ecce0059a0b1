# syntax=docker/dockerfile:1

# Build a static binary: no cgo, so it runs on an image without a libc.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/membership .

# distroless/static holds CA certificates, tzdata and a nonroot user, nothing else.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/membership /membership
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/membership"]
