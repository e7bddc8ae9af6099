//! A TCP proxy that can be cut and restored: a network partition between one process
//! and one server, on loopback.

use std::io::ErrorKind;
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Forwards connections on `port` to a target. While cut, open connections are shut
/// down and new ones are closed as soon as they are accepted.
pub struct Proxy {
    pub port: u16,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    /// A proxy to `target` (`host:port`), forwarding until the test process ends.
    pub fn to(target: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let (cut, open) = (Arc::new(AtomicBool::new(false)), Arc::new(Mutex::new(Vec::new())));
        let (cut_, open_) = (cut.clone(), open.clone());
        std::thread::spawn(move || {
            loop {
                match listener.accept() {
                    Ok((client, _)) if cut_.load(Ordering::SeqCst) => drop(client),
                    Ok((client, _)) => forward(client, &target, &open_),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(10)),
                    Err(e) => panic!("proxy accept: {e}"),
                }
            }
        });
        Self { port, cut, open }
    }

    /// Cuts: open connections are shut down, new ones closed.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }

    /// Forwards new connections again.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

fn forward(client: TcpStream, target: &str, open: &Mutex<Vec<TcpStream>>) {
    client.set_nonblocking(false).unwrap();
    let Ok(server) = TcpStream::connect(target) else { return };
    let mut open = open.lock().unwrap();
    // Connections already closed need not be kept for a later cut.
    open.retain(|s| s.peer_addr().is_ok());
    open.extend([client.try_clone().unwrap(), server.try_clone().unwrap()]);
    for (mut from, mut to) in [(client.try_clone().unwrap(), server.try_clone().unwrap()), (server, client)] {
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut from, &mut to);
            let _ = to.shutdown(Shutdown::Both);
        });
    }
}
