//! A real headless Chromium (Debian's `chromium`, driven by `chromium-driver` over
//! WebDriver) for the fleet page's tests, and the screenshots docs/ui.md shows.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::controller::{Running, free_port};

/// One WebDriver call to chromedriver on `port`: its `value`.
pub fn webdriver(port: u16, method: &str, path: &str, body: Option<serde_json::Value>) -> serde_json::Value {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    // chromedriver keeps the connection open: read the head, then Content-Length bytes.
    let mut response = Vec::new();
    let mut chunk = [0u8; 64 << 10];
    let body = loop {
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "{method} {path}: chromedriver closed the connection");
        response.extend_from_slice(&chunk[..n]);
        let Some(end) = response.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&response[..end]).to_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("a Content-Length");
        if response.len() >= end + 4 + length {
            break response[end + 4..end + 4 + length].to_vec();
        }
    };
    let text = String::from_utf8_lossy(&body);
    let value: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {path}: {e}: {text}"));
    assert!(value["value"].get("error").is_none(), "{method} {path}: {value}");
    value["value"].clone()
}

/// A headless Chromium driven by chromedriver, closed on drop.
pub struct Browser {
    port: u16,
    session: String,
    _driver: Running,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub fn start() -> Self {
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (Debian's chromium-driver; hack/test.sh installs it)");
        let driver = Running(driver);
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(start.elapsed() < Duration::from_secs(20), "chromedriver did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::tempdir().unwrap();
        let args =
            ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,800", "--disable-dev-shm-usage"];
        let mut args: Vec<String> = args.map(String::from).to_vec();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let capabilities = serde_json::json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args}
        }}});
        let session = webdriver(port, "POST", "/session", Some(capabilities));
        let session = session["sessionId"].as_str().unwrap().to_owned();
        Browser { port, session, _driver: driver, _profile: profile }
    }

    pub fn open(&self, url: &str) {
        webdriver(self.port, "POST", &format!("/session/{}/url", self.session), Some(serde_json::json!({"url": url})));
    }

    pub fn run(&self, script: &str) -> serde_json::Value {
        let body = serde_json::json!({"script": script, "args": []});
        webdriver(self.port, "POST", &format!("/session/{}/execute/sync", self.session), Some(body))
    }

    /// A screenshot, kept under `$FLOTILLA_UI_SCREENSHOTS/NAME.png` when that is set
    /// (docs/ui.md's are made so).
    pub fn screenshot(&self, name: &str) {
        let png = webdriver(self.port, "GET", &format!("/session/{}/screenshot", self.session), None);
        let png = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, png.as_str().unwrap()).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        if let Some(dir) = std::env::var_os("FLOTILLA_UI_SCREENSHOTS") {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(Path::new(&dir).join(format!("{name}.png")), png).unwrap();
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ =
            std::panic::catch_unwind(|| webdriver(self.port, "DELETE", &format!("/session/{}", self.session), None));
    }
}

/// Opens each of the controller's `views` (path and screenshot name) on the page the
/// controller on `port` serves: each answers with its own heading, then its screenshot.
/// Blocking (chromedriver is spoken to synchronously): call it from a test's thread, or
/// inside `block_in_place` in an async test.
pub fn shoot(port: u16, views: &[(&str, &str, &str)]) {
    let browser = Browser::start();
    for (path, heading, name) in views {
        browser.open(&format!("http://127.0.0.1:{port}{path}"));
        let h1 = browser.run("return document.querySelector('main h1') && document.querySelector('main h1').innerText");
        assert_eq!(h1.as_str(), Some(*heading), "{path}");
        browser.screenshot(name);
    }
}
