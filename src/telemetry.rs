//! Logs go to stderr through `tracing`, human-readable or JSON; data goes to stdout.

use std::io::Write;

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// The filter unless `RUST_LOG` sets one: `info`, without kube-client's own line per
/// failed request ("failed with error …"), which names no cluster and repeats what
/// flotilla's own line for that attempt already says, thousands of times an hour for
/// an unreachable member.
pub const DEFAULT_FILTER: &str = "info,kube_client::client::builder=off";

/// Installs the global subscriber. `RUST_LOG` overrides [`DEFAULT_FILTER`].
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    match format {
        // Values come from repositories and members: one event stays one line.
        LogFormat::Human => builder.with_writer(|| OneLine(std::io::stderr())).without_time().init(),
        // JSON escapes every control character itself.
        LogFormat::Json => builder.with_writer(std::io::stderr).json().init(),
    }
}

/// A writer of whole log events (the formatter writes each event in one call) that
/// writes out the hidden characters inside each ([`flotilla_core::escape::log_event`]).
struct OneLine<W>(W);

impl<W: Write> Write for OneLine<W> {
    fn write(&mut self, event: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(event);
        self.0.write_all(flotilla_core::escape::log_event(&text).as_bytes())?;
        Ok(event.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_default_filter_drops_kube_client_s_line_per_failed_request_and_keeps_ours() {
        let captured = Captured::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_env_filter(EnvFilter::new(DEFAULT_FILTER))
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(target: "kube_client::client::builder", "failed with error client error (Connect)");
            tracing::error!(target: "kube_client::api", "another kube-client line");
            tracing::error!(cluster = "member2", "cluster not reconciled");
            tracing::debug!("below the default level");
        });
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(!text.contains("failed with error") && !text.contains("below the default"), "{text}");
        assert!(text.contains("another kube-client line") && text.contains("cluster not reconciled"), "{text}");
    }

    #[test]
    fn a_hostile_value_cannot_forge_or_overwrite_a_log_line() {
        let captured = Captured::default();
        let sink = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || OneLine(sink.clone()))
            .without_time()
            .with_ansi(false)
            .with_target(false)
            .finish();
        let name = "web\nINFO all clusters applied\r\u{1b}]8;;http://evil\u{7}link";
        tracing::subscriber::with_default(subscriber, || tracing::warn!(object = name, "render problem"));
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 1, "{text:?}");
        assert!(!text.contains('\r') && !text.contains('\u{1b}') && !text.contains('\u{7}'), "{text:?}");
        assert!(text.contains("web\\nINFO all clusters applied\\r"), "{text:?}");
    }
}
