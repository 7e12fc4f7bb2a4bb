# The `mck` command line in a slim image: `docker build -t mck:latest .`
#
# Built in the official Rust image (its compilers, make and perl build librdkafka,
# OpenSSL and curl from source; CMake is added), without the `demo` feature and its
# test kit. The runtime image holds what the binary links dynamically (glibc, libgcc,
# libz) and the CA certificates TLS and OIDC endpoints are checked against.
FROM rust:1.91-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends cmake \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo install --locked --path crates/mck --no-default-features --root /out

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates zlib1g libgcc-s1 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/bin/mck /usr/local/bin/mck
# Not root; the manifests in deploy/kubernetes run it as this user, with volumes
# writable by its group.
USER 65532:65532
ENTRYPOINT ["mck"]
