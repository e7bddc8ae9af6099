//! libgit2's TCP connections, made by us so that Nagle's algorithm is off.
//!
//! libgit2 writes an HTTP request's headers and its body in two writes and never sets
//! `TCP_NODELAY`, so the body of every smart-HTTP POST (`git-upload-pack`,
//! `git-receive-pack`) waits in the kernel until the server acknowledges the headers,
//! and a Linux server delays that acknowledgement by 40 ms while it waits for the body.
//! One fetch from a git server on the same network took 74 ms, 40 of them this wait
//! (docs/performance.md, "Peers side by side"). curl, Go's net/http (Flux) and hyper
//! all turn Nagle off; libgit2 lets an embedder supply the socket
//! (`git_stream_register`), so we do: the TLS that libgit2 layers on top, its proxy
//! handling, credentials and redirects are unchanged.
//!
//! The stream keeps the layout of libgit2's own socket stream (`git_socket_stream`:
//! the stream, host, port, then the descriptor), because libgit2's SSH transport reads
//! the descriptor at that place to hand it to libssh2. The vendored libgit2 is pinned
//! by `libgit2-sys`; `tests/it/remotes.rs` fetches over HTTPS and SSH through it.

#![allow(unsafe_code)]

use std::ffi::{CStr, CString, c_char, c_int, c_uint, c_void};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::time::Duration;

use libgit2_sys as raw;

/// `git_stream` (include/git2/sys/stream.h, version 1).
#[repr(C)]
struct GitStream {
    version: c_int,
    /// The `encrypted` and `proxy_support` bits: neither, for a plain socket.
    flags: c_uint,
    timeout: c_int,
    connect_timeout: c_int,
    connect: Option<unsafe extern "C" fn(*mut GitStream) -> c_int>,
    certificate: Option<unsafe extern "C" fn(*mut *mut c_void, *mut GitStream) -> c_int>,
    set_proxy: Option<unsafe extern "C" fn(*mut GitStream, *const c_void) -> c_int>,
    read: Option<unsafe extern "C" fn(*mut GitStream, *mut c_void, usize) -> isize>,
    write: Option<unsafe extern "C" fn(*mut GitStream, *const c_char, usize, c_int) -> isize>,
    close: Option<unsafe extern "C" fn(*mut GitStream) -> c_int>,
    free: Option<unsafe extern "C" fn(*mut GitStream)>,
}

/// `git_stream_registration`.
#[repr(C)]
struct Registration {
    version: c_int,
    init: Option<unsafe extern "C" fn(*mut *mut GitStream, *const c_char, *const c_char) -> c_int>,
    wrap: Option<unsafe extern "C" fn(*mut *mut GitStream, *mut GitStream, *const c_char) -> c_int>,
}

const GIT_STREAM_VERSION: c_int = 1;
const GIT_STREAM_STANDARD: c_int = 1;

unsafe extern "C" {
    fn git_stream_register(kind: c_int, registration: *mut Registration) -> c_int;
}

/// Our socket stream: `git_socket_stream`'s fields first (see the module's comment),
/// then the socket itself.
#[repr(C)]
struct Stream {
    parent: GitStream,
    host: *mut c_char,
    port: *mut c_char,
    /// The socket's descriptor, or -1: read by libgit2's SSH transport.
    fd: c_int,
    socket: Option<TcpStream>,
}

/// Makes every TCP connection libgit2 opens from now on one of ours: `connect` bounds
/// connecting, `stall` each read and write. Must be called before any other thread
/// uses libgit2 (the registry is global).
pub fn register(connect: Duration, stall: Duration) -> Result<(), git2::Error> {
    CONNECT.set(connect).ok();
    STALL.set(stall).ok();
    raw::init();
    let mut registration = Registration { version: GIT_STREAM_VERSION, init: Some(init), wrap: None };
    // SAFETY: libgit2 is initialised; the registration is copied, not kept.
    let code = unsafe { git_stream_register(GIT_STREAM_STANDARD, &mut registration) };
    if code < 0 { Err(git2::Error::from_str("registering libgit2's socket stream failed")) } else { Ok(()) }
}

static CONNECT: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
static STALL: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();

fn millis(d: Duration) -> c_int {
    c_int::try_from(d.as_millis()).unwrap_or(c_int::MAX)
}

/// Tells libgit2 why the call failed; returns `code`.
fn fail<T>(code: T, message: &str) -> T {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    // SAFETY: the text is a valid C string; libgit2 copies it.
    unsafe { raw::git_error_set_str(raw::GIT_ERROR_NET as c_int, text.as_ptr()) };
    code
}

/// A stream to `host`:`port`, not yet connected.
unsafe extern "C" fn init(out: *mut *mut GitStream, host: *const c_char, port: *const c_char) -> c_int {
    if out.is_null() || host.is_null() || port.is_null() {
        return fail(-1, "no host or port to connect to");
    }
    // SAFETY: libgit2 passes NUL-terminated strings it owns for the call; we copy them.
    let (host, port) = unsafe { (CStr::from_ptr(host).to_owned(), CStr::from_ptr(port).to_owned()) };
    let stream = Box::new(Stream {
        parent: GitStream {
            version: GIT_STREAM_VERSION,
            flags: 0,
            timeout: millis(STALL.get().copied().unwrap_or_default()),
            connect_timeout: millis(CONNECT.get().copied().unwrap_or_default()),
            connect: Some(connect),
            certificate: None,
            set_proxy: None,
            read: Some(read),
            write: Some(write),
            close: Some(close),
            free: Some(free),
        },
        host: host.into_raw(),
        port: port.into_raw(),
        fd: -1,
        socket: None,
    });
    // SAFETY: `out` is non-null; libgit2 owns the stream until it calls `free`.
    unsafe { *out = Box::into_raw(stream).cast() };
    0
}

/// The stream libgit2 handed back: `GitStream` is the first field of `Stream`.
///
/// # Safety
/// `stream` must come from [`init`] and not have been freed.
unsafe fn ours<'a>(stream: *mut GitStream) -> &'a mut Stream {
    // SAFETY: per the contract, it is a live `Stream` libgit2 gives us exclusively.
    unsafe { &mut *stream.cast::<Stream>() }
}

/// Connects to the first address of the host that answers, within the connect bound.
unsafe extern "C" fn connect(stream: *mut GitStream) -> c_int {
    // SAFETY: libgit2 calls this on a stream from `init`.
    let st = unsafe { ours(stream) };
    // SAFETY: both were made by `CString::into_raw` in `init`.
    let (host, port) = unsafe { (CStr::from_ptr(st.host), CStr::from_ptr(st.port)) };
    let host = host.to_string_lossy();
    let Ok(port) = port.to_string_lossy().parse::<u16>() else {
        return fail(-1, &format!("failed to connect to {host}: the port is not a number"));
    };
    let addresses = match (host.as_ref(), port).to_socket_addrs() {
        Ok(a) => a,
        Err(e) => return fail(-1, &format!("failed to resolve address for {host}: {e}")),
    };
    let connect_within = Duration::from_millis(st.parent.connect_timeout.max(0) as u64);
    let mut last = format!("failed to connect to {host}: no address");
    for address in addresses {
        let attempt = if connect_within.is_zero() {
            TcpStream::connect(address)
        } else {
            TcpStream::connect_timeout(&address, connect_within)
        };
        match attempt.and_then(|s| configure(s, st.parent.timeout)) {
            Ok(socket) => {
                st.fd = socket.as_raw_fd();
                st.socket = Some(socket);
                return 0;
            }
            Err(e) if e.kind() == ErrorKind::TimedOut => {
                return fail(raw::GIT_TIMEOUT, &format!("failed to connect to {host}: timed out"));
            }
            Err(e) => last = format!("failed to connect to {host}: {e}"),
        }
    }
    fail(-1, &last)
}

/// Nagle off, and each read and write bounded by `timeout` milliseconds (0: unbounded).
fn configure(socket: TcpStream, timeout: c_int) -> std::io::Result<TcpStream> {
    socket.set_nodelay(true)?;
    let bound = (timeout > 0).then(|| Duration::from_millis(timeout as u64));
    socket.set_read_timeout(bound)?;
    socket.set_write_timeout(bound)?;
    Ok(socket)
}

/// What a read or write came to, as libgit2 counts it.
fn outcome(done: std::io::Result<usize>, what: &str) -> isize {
    match done {
        Ok(n) => n as isize,
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            fail(raw::GIT_TIMEOUT as isize, &format!("could not {what} socket: timed out"))
        }
        Err(e) => fail(-1, &format!("could not {what} socket: {e}")),
    }
}

unsafe extern "C" fn read(stream: *mut GitStream, data: *mut c_void, len: usize) -> isize {
    // SAFETY: libgit2 calls this on a stream from `init`.
    let st = unsafe { ours(stream) };
    let Some(socket) = st.socket.as_mut() else { return fail(-1, "could not read from socket: not connected") };
    // SAFETY: libgit2 passes a buffer of `len` writable bytes.
    let buffer = unsafe { std::slice::from_raw_parts_mut(data.cast::<u8>(), len) };
    outcome(retrying(|| socket.read(buffer)), "read from")
}

unsafe extern "C" fn write(stream: *mut GitStream, data: *const c_char, len: usize, _flags: c_int) -> isize {
    // SAFETY: libgit2 calls this on a stream from `init`.
    let st = unsafe { ours(stream) };
    let Some(socket) = st.socket.as_mut() else { return fail(-1, "could not write to socket: not connected") };
    // SAFETY: libgit2 passes `len` readable bytes.
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
    outcome(retrying(|| socket.write(bytes)), "write to")
}

/// Runs an I/O call again when a signal interrupted it.
fn retrying(mut call: impl FnMut() -> std::io::Result<usize>) -> std::io::Result<usize> {
    loop {
        match call() {
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

unsafe extern "C" fn close(stream: *mut GitStream) -> c_int {
    // SAFETY: libgit2 calls this on a stream from `init`.
    let st = unsafe { ours(stream) };
    st.socket = None;
    st.fd = -1;
    0
}

unsafe extern "C" fn free(stream: *mut GitStream) {
    if stream.is_null() {
        return;
    }
    // SAFETY: the stream came from `Box::into_raw` in `init`, and libgit2 frees it once.
    let st = unsafe { Box::from_raw(stream.cast::<Stream>()) };
    // SAFETY: both came from `CString::into_raw` in `init`.
    unsafe {
        drop(CString::from_raw(st.host));
        drop(CString::from_raw(st.port));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Opens one of our streams to `port` through the function pointers libgit2 calls.
    fn open(port: u16, timeout_ms: c_int) -> (*mut GitStream, c_int) {
        raw::init();
        let mut out: *mut GitStream = std::ptr::null_mut();
        let host = CString::new("127.0.0.1").unwrap();
        let port = CString::new(port.to_string()).unwrap();
        // SAFETY: valid strings and out-pointer, as libgit2 passes them.
        assert_eq!(unsafe { init(&mut out, host.as_ptr(), port.as_ptr()) }, 0);
        // SAFETY: `out` is a stream from `init`.
        unsafe { (*out).timeout = timeout_ms };
        let code = unsafe { ((*out).connect.unwrap())(out) };
        (out, code)
    }

    #[test]
    fn connections_have_nagle_off_and_carry_bytes_both_ways() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut peer, _) = listener.accept().unwrap();
            let mut got = [0u8; 5];
            peer.read_exact(&mut got).unwrap();
            peer.write_all(b"world").unwrap();
            got
        });
        let (stream, code) = open(port, 5_000);
        assert_eq!(code, 0);
        // SAFETY: a connected stream from `init`; buffers sized as passed.
        unsafe {
            let st = ours(stream);
            assert!(st.socket.as_ref().unwrap().nodelay().unwrap(), "TCP_NODELAY is set");
            // The descriptor where libgit2's SSH transport reads it.
            assert_eq!(st.fd, st.socket.as_ref().unwrap().as_raw_fd());
            assert_eq!(((*stream).write.unwrap())(stream, c"hello".as_ptr(), 5, 0), 5);
            let mut buffer = [0u8; 16];
            let n = ((*stream).read.unwrap())(stream, buffer.as_mut_ptr().cast(), buffer.len());
            assert_eq!(&buffer[..n as usize], b"world");
            assert_eq!(((*stream).close.unwrap())(stream), 0);
            assert_eq!(ours(stream).fd, -1);
            ((*stream).free.unwrap())(stream);
        }
        assert_eq!(&server.join().unwrap(), b"hello");
    }

    /// A TCP socket bound to a loopback port without `listen`.
    struct BoundNotListening {
        fd: i32,
        port: u16,
    }

    impl BoundNotListening {
        fn new() -> Self {
            // SAFETY: plain socket calls on a descriptor this struct owns; the
            // address structures are sized as passed.
            unsafe {
                let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
                assert!(fd >= 0, "socket");
                let mut address: libc::sockaddr_in = std::mem::zeroed();
                address.sin_family = libc::AF_INET as libc::sa_family_t;
                address.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
                let size = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                assert_eq!(libc::bind(fd, (&raw const address).cast(), size), 0, "bind");
                let mut length = size;
                assert_eq!(libc::getsockname(fd, (&raw mut address).cast(), &mut length), 0);
                Self { fd, port: u16::from_be(address.sin_port) }
            }
        }
    }

    impl Drop for BoundNotListening {
        fn drop(&mut self) {
            // SAFETY: the descriptor is ours and closed once.
            unsafe { libc::close(self.fd) };
        }
    }

    #[test]
    fn a_silent_server_times_a_read_out_and_a_closed_port_fails_to_connect() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (stream, code) = open(port, 100);
        assert_eq!(code, 0);
        // SAFETY: a connected stream from `init`.
        unsafe {
            let mut buffer = [0u8; 4];
            let n = ((*stream).read.unwrap())(stream, buffer.as_mut_ptr().cast(), buffer.len());
            assert_eq!(n, raw::GIT_TIMEOUT as isize);
            let message = CStr::from_ptr((*raw::git_error_last()).message).to_string_lossy().into_owned();
            assert_eq!(message, "could not read from socket: timed out");
            ((*stream).free.unwrap())(stream);
        }
        drop(listener);
        // A port held bound but not listening refuses connections, and no other
        // test can take it, nor can the kernel pick it as this connection's own
        // source port (a self-connect to a freed ephemeral port succeeds).
        let closed = BoundNotListening::new();
        let (stream, code) = open(closed.port, 100);
        assert_eq!(code, -1, "nothing listens on the port any more");
        // SAFETY: a stream from `init`, never connected.
        unsafe {
            let message = CStr::from_ptr((*raw::git_error_last()).message).to_string_lossy().into_owned();
            assert!(message.starts_with("failed to connect to 127.0.0.1: "), "{message}");
            ((*stream).free.unwrap())(stream);
        }
    }
}
