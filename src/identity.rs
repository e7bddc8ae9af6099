//! Who this process is: the holder named in the Lease, and the `User-Agent` of every
//! request to a cluster, so an API server's audit log tells one replica from another.

use std::sync::OnceLock;

/// `HOSTNAME-PID` (the Pod name in-cluster), made once.
pub fn identity() -> &'static str {
    static IDENTITY: OnceLock<String> = OnceLock::new();
    IDENTITY.get_or_init(|| {
        let host = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "flotilla".into());
        format!("{host}-{}", std::process::id())
    })
}

/// Sets `User-Agent: flotilla/VERSION (IDENTITY)` on a client's configuration.
pub fn set_user_agent(config: &mut kube::Config) {
    let agent = format!("flotilla/{} ({})", env!("CARGO_PKG_VERSION"), identity());
    if let Ok(value) = http::HeaderValue::from_str(&agent) {
        config.headers.push((http::header::USER_AGENT, value));
    }
}
