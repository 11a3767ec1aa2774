# Container image of the apiserver binary.
#
#   docker build -t apiserver:latest .
#   docker run --rm -p 6443:6443 -v apiserver-data:/var/lib/apiserver \
#       apiserver:latest --etcd-servers=http://etcd:2379
#   docker run --rm -v apiserver-data:/data busybox cat /data/admin.kubeconfig > admin.kubeconfig
#
# The image has no etcd inside: pass --etcd-servers (or APISERVER_ETCD_SERVERS).
# It serves TLS on 6443 (the plain port stays on the container's loopback).
# Without --tls-cert-file the server makes a CA, serving certificate,
# admin.kubeconfig and service-account key under /var/lib/apiserver.

# --- build stage: the Rust toolchain plus protoc (etcd-client's build script) ---
FROM rust:1.95-bookworm AS builder

# Only the build stage installs packages; protoc is whatever Debian stable ships
# (exact versions are replaced by point releases, so they are not pinned).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends protobuf-compiler \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin apiserver \
    && strip target/release/apiserver

# --- runtime stage: the binary and a non-root user, no compilers or package caches ---
FROM debian:bookworm-slim AS runtime

RUN groupadd --system --gid 10001 apiserver \
    && useradd --system --uid 10001 --gid apiserver \
       --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin apiserver \
    && install -d -o 10001 -g 10001 -m 0700 /var/lib/apiserver

COPY --from=builder /src/target/release/apiserver /usr/local/bin/apiserver

USER 10001:10001
WORKDIR /tmp
VOLUME ["/var/lib/apiserver"]
EXPOSE 6443
ENTRYPOINT ["/usr/local/bin/apiserver", "--secure-listen=0.0.0.0:6443", "--data-dir=/var/lib/apiserver"]
