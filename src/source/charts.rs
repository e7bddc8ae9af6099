//! Remote charts (a HelmChart's `spec.repository`): fetched only when the process is
//! told to (`--fetch-charts`), verified against the digest the HelmChart pins, and kept
//! by that digest, so a chart fetched once renders offline from then on and a
//! repository that serves different bytes under the same version is refused, never
//! rendered. `helm pull` does the fetching (from an https Helm repository or an OCI
//! registry), in the same sandbox as every render, with only the machine's CA and proxy
//! settings added.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, bail};
use flotilla_core::sources::RemoteChart;
use sha2::{Digest, Sha256};

use super::tool;

/// Whether this process may fetch charts.
static FETCH: AtomicBool = AtomicBool::new(false);

/// The largest chart archive taken (the repository's limit for one file).
const ARCHIVE_LIMIT: u64 = 16 << 20;

/// Variables `helm pull` keeps: where the machine's CAs and proxies are. No credential
/// of the machine is passed; an OCI registry's come only from `--chart-registry-config`.
const FETCH_ENV: [&str; 7] =
    ["SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "NO_PROXY", "no_proxy"];

/// The registry credentials file `helm pull` of an OCI chart gets, if any.
static REGISTRY_CONFIG: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();

/// Sets the credentials file for private OCI registries (`--chart-registry-config`),
/// once per process; it must be a readable file. Only its path is ever shown.
pub fn registry_config(path: Option<PathBuf>) -> anyhow::Result<()> {
    if let Some(path) = &path {
        std::fs::File::open(path).with_context(|| {
            format!("--chart-registry-config {}: cannot read the registry credentials file", path.display())
        })?;
    }
    let _ = REGISTRY_CONFIG.set(path);
    Ok(())
}

/// Lets (or stops) this process fetch charts it does not hold.
pub fn allow_fetching(yes: bool) {
    FETCH.store(yes, Ordering::Relaxed);
}

/// The archive of `chart`: from the chart cache, or fetched when allowed; either way its
/// sha256 is the pinned digest.
pub fn archive(chart: &RemoteChart) -> anyhow::Result<Vec<u8>> {
    let path = cached(chart)?;
    if let Ok(bytes) = std::fs::read(&path) {
        if hex::encode(Sha256::digest(&bytes)) == chart.hex() {
            return Ok(bytes);
        }
        // A damaged copy is dropped and fetched again, never used.
        let _ = std::fs::remove_file(&path);
    }
    let shown = format!("chart {} {} from {}", chart.name, chart.version, chart.url);
    if !FETCH.load(Ordering::Relaxed) {
        bail!(
            "{shown} is not in the chart cache: run with --fetch-charts to fetch it (it is verified against spec.repository.digest)"
        );
    }
    let bytes = fetch(chart).with_context(|| format!("cannot fetch {shown}"))?;
    let got = hex::encode(Sha256::digest(&bytes));
    if got != chart.hex() {
        bail!(
            "{shown}: the archive is sha256:{got}, not {} as spec.repository.digest pins; nothing is rendered from it",
            chart.digest
        );
    }
    keep(&path, &bytes);
    Ok(bytes)
}

/// Where the archive of `chart` is kept: `<source cache>/charts/sha256-<hex>.tgz`.
fn cached(chart: &RemoteChart) -> anyhow::Result<PathBuf> {
    let dir = super::expand::cache_dir().context("no cache directory for charts (set FLOTILLA_SOURCE_CACHE)")?;
    Ok(dir.join("charts").join(format!("sha256-{}.tgz", chart.hex())))
}

/// `helm pull` into a scratch directory; the one archive it leaves.
fn fetch(chart: &RemoteChart) -> anyhow::Result<Vec<u8>> {
    let helm = tool::find("helm")?;
    let scratch = tempfile::tempdir().context("cannot make a scratch directory")?;
    let (home, out) = (scratch.path().join("home"), scratch.path().join("out"));
    std::fs::create_dir_all(home.join("plugins"))?;
    std::fs::create_dir_all(&out)?;
    let out_arg = out.to_string_lossy().into_owned();
    // An OCI URL names the chart; a Helm repository's chart is named beside it.
    let mut args = vec!["pull"];
    if chart.is_oci() {
        args.push(&chart.url);
    } else {
        args.extend([chart.name.as_str(), "--repo", &chart.url]);
    }
    args.extend(["--version", &chart.version, "--destination", &out_arg]);
    let mut env: Vec<(&str, PathBuf)> = vec![
        ("HELM_CACHE_HOME", home.join("cache")),
        ("HELM_CONFIG_HOME", home.join("config")),
        ("HELM_DATA_HOME", home.join("data")),
        ("HELM_PLUGINS", home.join("plugins")),
        ("KUBECONFIG", home.join("no-kubeconfig")),
    ];
    env.extend(FETCH_ENV.iter().filter_map(|k| std::env::var_os(k).map(|v| (*k, PathBuf::from(v)))));
    // Credentials the operator gave, for OCI registries only (each is kept for its
    // registry's host); a Helm repository's credentials are not supported.
    if let Some(Some(config)) = REGISTRY_CONFIG.get()
        && chart.is_oci()
    {
        env.push(("HELM_REGISTRY_CONFIG", config.clone()));
    }
    let env: Vec<(&str, &std::path::Path)> = env.iter().map(|(k, v)| (*k, v.as_path())).collect();
    tool::run(&helm.path, &args, scratch.path(), &home, &env)
        .map_err(|message| anyhow::anyhow!("helm pull: {message}"))?;
    let archives: Vec<PathBuf> = std::fs::read_dir(&out)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    let [archive] = archives.as_slice() else { bail!("helm pull left {} files, not one archive", archives.len()) };
    let size = archive.metadata()?.len();
    if size > ARCHIVE_LIMIT {
        bail!("the archive is {size} bytes, over the limit of {ARCHIVE_LIMIT}");
    }
    Ok(std::fs::read(archive)?)
}

/// Keeps a verified archive.
fn keep(path: &std::path::Path, bytes: &[u8]) {
    if let Err(e) = super::expand::write_whole(path, bytes) {
        tracing::warn!(error = %e, "cannot keep a fetched chart: it will be fetched again");
    }
}
