//! flotilla's one integration test binary.

pub mod apply; // `flotilla apply` on real members: seeds, no-op, prune, broken commits, a dead member
mod autoscale; // the FederatedHPA seed: metrics in members, write-back commits, no flapping
mod browser; // a real headless Chromium for the fleet page, and its screenshots
mod cache; // the Git cache: a damaged one is started afresh and the branch still deploys
mod chaos; // `hack/chaos.sh`: a seeded fault-injection soak with invariants read from the members
mod cli; // the CLI contract: JSON shape, exit codes, filters, --ref, --out-dir
pub mod controller; // `flotilla run` with a real git daemon: follow, keep last good, webhooks
mod converge; // each member converges on its own: a frozen member holds no other's commits
mod e2e; // the member clusters themselves: real pods, readiness, isolation
mod failover; // a stopped member's replicas run elsewhere; nothing is lost when it returns
mod fence; // a leader cut off from its Lease stops writing before a standby leads
mod gitea; // a real forge for the preview tests: Gitea built from its Go module
mod helm_renderer; // flotilla-helm prints what helm template prints, byte for byte, and refuses what it refuses
mod hostile; // hostile repos: bombs, huge and deep documents, escaping symlinks, bad fields
mod interpret; // the resource interpreter on real members: a custom kind divided and judged by its Lua scripts
mod inventory; // the inventory: its source, recovery from corruption, parts past one ConfigMap
mod members; // the member-cluster harness (hack/local-up.sh, per-test namespaces)
mod outage; // failure and attack: a Git outage, slowloris clients, webhook listener, empty secret
mod pipeline; // fixture repos rendered through the core, as YAML snapshots
mod previews; // PR plans, statuses and preview environments on Gitea and real members
mod proxy; // a TCP proxy that can be cut and restored: partitions on loopback
mod pull; // pull mode: the push controller skips Pull members, their agents apply them
mod remotes; // authenticated remotes: https with a token behind TLS, ssh with a key and known_hosts
mod rollouts; // waves on real members: soak, a Prometheus gate halting and reverting, pause and resume, a standby
mod scope; // --scope against a member's discovery: cluster-scoped custom kinds never pass as namespaced
mod seeds; // the two seed tutorials' distributions
pub mod services; // multi-cluster Services: EndpointSlices from providers copied to consumers
mod shard; // members sharded over controller replicas on membership Leases
mod sources; // Helm charts and kustomizations: the tools' output placed, planned, refused when bad, reconciled
mod support; // shared helpers: running the binary, temporary repos
mod ui; // the fleet page: live cells, the why of a workload, escaping, no Secret values, tokens
