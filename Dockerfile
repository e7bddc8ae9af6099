# flotilla controller image: a static-enough release build on Debian slim, run as a
# non-root user with a read-only root filesystem (see deploy/flotilla.yaml).
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libssl-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin flotilla

FROM debian:bookworm-slim
# libssl3: libgit2's https and ssh transports; ca-certificates: https remotes;
# openssh-client: ssh-keygen, which --verify-commits and signed write-backs run.
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates libssl3 openssh-client \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/flotilla /usr/local/bin/flotilla
# Two malloc arenas: the controller is mostly idle, and more arenas only keep more
# freed memory (docs/performance.md, "memory soak").
ENV MALLOC_ARENA_MAX=2
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/flotilla"]
