//! Logs go to stderr through `tracing`, human-readable or JSON; data goes to stdout.

use std::io::Write;

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// Installs the global subscriber. `RUST_LOG` overrides the default level (`info`).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
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
