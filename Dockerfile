# The drainwatch node daemon image (deploy/daemonset expects it as `drainwatch`).
# The eBPF objects are generated and committed, so the build needs no clang.
# Not built in this repository's CI (no container engine there): `make build`
# builds the same binary.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/drainwatch/drainwatch/exporter.Version=${VERSION}" \
      -o /out/drainwatch ./cmd/drainwatch

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/drainwatch /usr/bin/drainwatch
ENTRYPOINT ["/usr/bin/drainwatch"]
