# syntax=docker/dockerfile:1
#
# mcpgate's container image: a static binary on distroless's static image,
# run as a numeric non-root user, with nothing in the image it needs to write
# (it runs with a read-only root file system). See docs/deploy.md.
#
#   docker build -t mcpgate:dev .
#   docker run --rm -p 8080:8080 --read-only mcpgate:dev          # the built-in demo
#   docker run --rm -p 8080:8080 --read-only -v "$PWD/my.yaml:/etc/mcpgate/config.yaml:ro" \
#     mcpgate:dev serve --addr 0.0.0.0:8080 --config /etc/mcpgate/config.yaml
#
# deploy/chartcheck's TestDockerfile parses this file and holds the facts
# above (the stages, the static build flags, the user, what the last stage
# copies, the entrypoint); change them together.

# The build stage: the Go toolchain go.mod asks for.
FROM golang:1.26 AS build
WORKDIR /src
# The module download is its own layer: it is rebuilt only when go.mod or
# go.sum change, not on every source edit.
COPY go.mod go.sum ./
# go.mod replaces a dependency with the patched copy in third_party/.
COPY third_party ./third_party
RUN go mod download
COPY . .
# VERSION, when given (--build-arg VERSION=v1.2.3), is what `mcpgate version`
# and serverInfo report; without it the build's module information decides
# (gateway/version.go), and .git is not in the build context (.dockerignore).
ARG VERSION=""
# CGO_ENABLED=0: a static binary that needs no libc in the image; -trimpath:
# no build machine paths in it; -s -w: no symbol table or DWARF (smaller).
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w ${VERSION:+-X github.com/mcpgate/mcpgate/gateway.Version=${VERSION}}" \
      -o /out/mcpgate ./cmd/mcpgate

# The runtime stage: distroless "static" holds CA certificates (for https
# upstreams and OpenID providers), /etc/passwd with the nonroot user
# (65532), tzdata, and no shell or package manager. The only file added is
# the binary.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mcpgate /mcpgate
# Numeric, so that Kubernetes' runAsNonRoot can check it without reading
# /etc/passwd.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/mcpgate"]
# 0.0.0.0: in a container the default 127.0.0.1:8080 would be reachable
# only from inside it.
CMD ["serve", "--addr", "0.0.0.0:8080"]
