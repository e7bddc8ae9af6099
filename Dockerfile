# flotilla controller image: a static-enough release build on Debian slim, run as a
# non-root user with a read-only root filesystem (see deploy/flotilla.yaml).
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libssl-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin flotilla

# helm (which pulls remote charts), flotilla-helm (`helm template` from the same
# packages, which renders them) and kustomize, for HelmChart sources and kustomizations
# (docs/sources.md), built from the Go modules hack/tools pins, as hack/build-tools.sh
# builds them for the tests.
FROM golang:1.26-bookworm AS tools
ENV GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
COPY hack/tools/helm /tools/helm
COPY hack/tools/kustomize /tools/kustomize
RUN cd /tools/helm \
    && version=$(sed -nE 's|^[[:space:]]*(require[[:space:]]+)?helm.sh/helm/v4 (v[^[:space:]]+).*|\2|p' go.mod | head -n1) \
    && go build -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$version" -o /out/ helm.sh/helm/v4/cmd/helm \
    && go build -trimpath -ldflags "-s -w" -o /out/ ./flotilla-helm \
    && cd /tools/kustomize && go build -trimpath -ldflags "-s -w" -o /out/ sigs.k8s.io/kustomize/kustomize/v5

FROM debian:bookworm-slim
# libssl3: libgit2's https and ssh transports; ca-certificates: https remotes;
# openssh-client: ssh-keygen, which --verify-commits and signed write-backs run.
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates libssl3 openssh-client \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/flotilla /usr/local/bin/flotilla
COPY --from=tools /out/helm /out/flotilla-helm /out/kustomize /usr/local/bin/
# Two malloc arenas: the controller is mostly idle, and more arenas only keep more
# freed memory (docs/performance.md, "memory soak").
ENV MALLOC_ARENA_MAX=2
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/flotilla"]
