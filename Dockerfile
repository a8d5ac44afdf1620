# syntax=docker/dockerfile:1
#
# One image with both binaries, `taskstore` and `taskworker`; a Deployment
# picks one with `command`. Build: `docker build -t mcp-taskstore .`
#
# The build stage runs deploy/build-release (CI runs its checks on its own
# build: `.ci/run`); the runtime stage is distroless: no shell, no package
# manager, no compiler, a non-root user. Neither binary needs anything from the system beyond
# glibc: the protobuf compiler is vendored at build time, SQLite is bundled,
# and TLS (to PostgreSQL and RabbitMQ) is rustls with Mozilla's root
# certificates compiled in.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    deploy/build-release /out

# cc-debian12 has glibc and libgcc, which Rust binaries link against.
FROM gcr.io/distroless/cc-debian12:nonroot AS runtime
LABEL org.opencontainers.image.title="mcp-taskstore" \
      org.opencontainers.image.description="Durable task store and workers for MCP tasks" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/taskstore /out/taskworker /usr/local/bin/
# 65532 is distroless's `nonroot`; numeric, so runAsNonRoot can verify it.
USER 65532:65532
# gRPC, then metrics and probes.
EXPOSE 50051 9090
ENTRYPOINT ["/usr/local/bin/taskstore"]
CMD ["serve", "--listen", "0.0.0.0:50051"]
