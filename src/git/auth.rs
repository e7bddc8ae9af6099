//! Credentials for a remote and the check of an ssh server's host key, both read from
//! files at each connection (a mounted Secret in a cluster), so rotated credentials are
//! picked up without a restart.

use std::path::PathBuf;

use git2::{CertificateCheckStatus, Cred, CredentialType, RemoteCallbacks};

/// Credentials for a remote, all read from files (a mounted Secret in a cluster) at
/// each connection, so rotated credentials are picked up without a restart. None of
/// them ever reaches a log or an error message.
#[derive(Debug, Clone, Default)]
pub struct GitAuth {
    /// User name for https (a token usually goes with any name; GitLab wants `oauth2`).
    pub username: Option<String>,
    /// Password or access token for https.
    pub password_file: Option<PathBuf>,
    /// Private key for ssh (OpenSSH or PEM format, no passphrase).
    pub ssh_key_file: Option<PathBuf>,
    /// known_hosts for ssh; the server's key must be listed (no trust on first use).
    pub known_hosts_file: Option<PathBuf>,
}

impl GitAuth {
    /// Callbacks answering the server's credential and host-key questions for `url`.
    pub fn callbacks<'a>(&'a self, url: &str) -> RemoteCallbacks<'a> {
        let mut callbacks = RemoteCallbacks::new();
        let mut attempts = 0;
        callbacks.credentials(move |_url, user_from_url, allowed| {
            // libgit2 asks again after a rejection; one answer per connection.
            attempts += 1;
            if attempts > 1 {
                return Err(git2::Error::from_str("the server rejected the credentials"));
            }
            self.credential(user_from_url, allowed)
        });
        let port = ssh_port(url);
        callbacks.certificate_check(move |cert, host| match cert.as_hostkey() {
            // https: libgit2 has verified the certificate against the trusted CAs.
            None => Ok(CertificateCheckStatus::CertificatePassthrough),
            Some(key) => self.check_host_key(host, port, key.hostkey()),
        });
        callbacks
    }

    fn credential(&self, user_from_url: Option<&str>, allowed: CredentialType) -> Result<Cred, git2::Error> {
        let user = self.username.as_deref().or(user_from_url).unwrap_or("git");
        if allowed.contains(CredentialType::USERNAME) {
            return Cred::username(user);
        }
        if allowed.contains(CredentialType::SSH_KEY)
            && let Some(key) = &self.ssh_key_file
        {
            let pem = std::fs::read_to_string(key)
                .map_err(|e| git2::Error::from_str(&format!("cannot read the ssh key {}: {e}", key.display())))?;
            return Cred::ssh_key_from_memory(user, None, &pem, None);
        }
        if allowed.contains(CredentialType::USER_PASS_PLAINTEXT)
            && let Some(file) = &self.password_file
        {
            let secret = std::fs::read_to_string(file)
                .map_err(|e| git2::Error::from_str(&format!("cannot read {}: {e}", file.display())))?;
            return Cred::userpass_plaintext(user, secret.trim_end_matches(['\n', '\r']));
        }
        Err(git2::Error::from_str("the server wants credentials and none are configured for them"))
    }

    fn check_host_key(&self, host: &str, port: u16, key: Option<&[u8]>) -> Result<CertificateCheckStatus, git2::Error> {
        let refuse = |why: String| {
            // libgit2 reports its own generic message; say here what was wrong.
            tracing::error!(reason = %why, "refusing the ssh server");
            Err(git2::Error::from_str(&why))
        };
        let Some(file) = &self.known_hosts_file else {
            return refuse(format!("no known_hosts file to check the ssh host key of {host} (--git-known-hosts-file)"));
        };
        let Some(key) = key else { return refuse(format!("{host} sent no host key")) };
        let known = std::fs::read_to_string(file)
            .map_err(|e| git2::Error::from_str(&format!("cannot read {}: {e}", file.display())))?;
        match known_host(&known, host, port, key) {
            Verdict::Known => Ok(CertificateCheckStatus::CertificateOk),
            Verdict::Changed => refuse(format!("the ssh host key of {host} does not match {}", file.display())),
            Verdict::Revoked => refuse(format!("the ssh host key of {host} is marked @revoked in {}", file.display())),
            Verdict::Unknown => refuse(format!("{host} is not in {}", file.display())),
        }
    }
}

/// What `known_hosts` says of a host's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Listed for the host.
    Known,
    /// The host is listed, with other keys only.
    Changed,
    /// The key is marked `@revoked` (for this host or all): refused wherever else it is
    /// listed.
    Revoked,
    /// The host is not listed.
    Unknown,
}

/// Checks `key` for `host` as OpenSSH reads `known_hosts`: a line's host patterns are a
/// comma-separated list of names (`host`, `[host]:port` for other ports than 22), `*` and
/// `?` wildcards, `!`-negations (a matching negation excludes the line) and hashed names
/// (`|1|salt|hash`, as `ssh-keyscan -H` and `HashKnownHosts` write them); names compare
/// case-insensitively. `@revoked` lines refuse their key; `@cert-authority` lines are
/// not used (libgit2 hands over the host key, not a certificate chain to check).
fn known_host(known_hosts: &str, host: &str, port: u16, key: &[u8]) -> Verdict {
    use base64::Engine;
    let host = host.to_ascii_lowercase();
    let name = if port == 22 { host } else { format!("[{host}]:{port}") };
    let mut verdict = Verdict::Unknown;
    for line in known_hosts.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let mut fields = line.split_whitespace().peekable();
        let marker = fields.next_if(|f| f.starts_with('@'));
        let (Some(hosts), Some(_kind), Some(blob)) = (fields.next(), fields.next(), fields.next()) else { continue };
        let same_key = || base64::engine::general_purpose::STANDARD.decode(blob).is_ok_and(|b| b == key);
        match marker {
            // Revoked keys are refused whatever their host patterns say.
            Some("@revoked") if same_key() => return Verdict::Revoked,
            Some(_) => continue,
            None if !hosts_match(hosts, &name) => continue,
            None if same_key() => verdict = Verdict::Known,
            None if verdict == Verdict::Unknown => verdict = Verdict::Changed,
            None => {}
        }
    }
    verdict
}

/// Whether a known_hosts host-pattern list names `name`: some pattern matches and no
/// negated one does.
fn hosts_match(patterns: &str, name: &str) -> bool {
    let mut matched = false;
    for pattern in patterns.split(',') {
        if let Some(negated) = pattern.strip_prefix('!') {
            if wildcard_match(&negated.to_ascii_lowercase(), name) {
                return false;
            }
        } else if wildcard_match(&pattern.to_ascii_lowercase(), name) || hashed_match(pattern, name) {
            matched = true;
        }
    }
    matched
}

/// OpenSSH's pattern match: `*` is any run of characters, `?` any one.
fn wildcard_match(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            // Let the last star swallow one more character.
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Whether a hashed known_hosts pattern `|1|<salt>|<HMAC-SHA1(salt, name)>` is `name`.
fn hashed_match(pattern: &str, name: &str) -> bool {
    use base64::Engine;
    use hmac::{KeyInit, Mac};
    let Some(rest) = pattern.strip_prefix("|1|") else { return false };
    let Some((salt, hash)) = rest.split_once('|') else { return false };
    let decode = |s: &str| base64::engine::general_purpose::STANDARD.decode(s).ok();
    let (Some(salt), Some(hash)) = (decode(salt), decode(hash)) else { return false };
    let Ok(mut mac) = <hmac::Hmac<sha1::Sha1> as KeyInit>::new_from_slice(&salt) else { return false };
    mac.update(name.as_bytes());
    mac.verify_slice(&hash).is_ok()
}

/// The port of an `ssh://` URL (22 for scp-like `user@host:path` and by default).
fn ssh_port(url: &str) -> u16 {
    url.strip_prefix("ssh://")
        .and_then(|rest| rest.split('/').next())
        .and_then(|authority| authority.rsplit('@').next())
        .and_then(|host_port| host_port.rsplit_once(':'))
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or(22)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HMAC-SHA1 of `[127.0.0.1]:2222` keyed with the bytes 1..=20, from OpenSSL.
    const HASH_127_2222: &str = "6nwC5rG6k7vxYwKIoAwPZGhI1VE=";

    #[test]
    fn host_keys_are_checked_against_known_hosts() {
        let key = b"\0\0\0\x0bssh-ed25519 key bytes";
        let other = b"\0\0\0\x0bssh-ed25519 other bytes";
        let b64 = |k: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, k);
        let known = format!(
            "# comment\ngit.example ssh-ed25519 {}\n[127.0.0.1]:2222,other ssh-ed25519 {}\n",
            b64(key),
            b64(other)
        );
        assert_eq!(known_host(&known, "git.example", 22, key), Verdict::Known);
        assert_eq!(known_host(&known, "GIT.Example", 22, key), Verdict::Known, "names compare case-insensitively");
        assert_eq!(known_host(&known, "git.example", 2222, key), Verdict::Unknown, "another port is another host");
        assert_eq!(known_host(&known, "127.0.0.1", 2222, key), Verdict::Changed, "listed with another key");
        assert_eq!(known_host(&known, "127.0.0.1", 2222, other), Verdict::Known);
        assert_eq!(known_host(&known, "unknown", 22, key), Verdict::Unknown);
        // `ssh-keygen -H` of "[127.0.0.1]:2222" with salt 0x01..0x14 (computed by OpenSSL:
        // printf '[127.0.0.1]:2222' | openssl dgst -sha1 -mac HMAC -macopt hexkey:0102…14).
        let salt: Vec<u8> = (1..=20).collect();
        let b64 = |k: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, k);
        let hashed = format!("|1|{}|{} ssh-ed25519 {}\n", b64(&salt), HASH_127_2222, b64(key));
        assert_eq!(known_host(&hashed, "127.0.0.1", 2222, key), Verdict::Known);
        assert_eq!(known_host(&hashed, "127.0.0.1", 2223, key), Verdict::Unknown);

        // Wildcards and negations, as OpenSSH reads them.
        let patterns = format!(
            "*.git.example,!evil.git.example ssh-ed25519 {}\n[git?.example]:2222 ssh-ed25519 {}\n",
            b64(key),
            b64(other)
        );
        assert_eq!(known_host(&patterns, "a.git.example", 22, key), Verdict::Known);
        assert_eq!(known_host(&patterns, "a.b.git.example", 22, key), Verdict::Known, "* crosses dots");
        assert_eq!(known_host(&patterns, "git.example", 22, key), Verdict::Unknown, "*. needs a label");
        assert_eq!(known_host(&patterns, "evil.git.example", 22, key), Verdict::Unknown, "negated");
        assert_eq!(known_host(&patterns, "git1.example", 2222, other), Verdict::Known);
        assert_eq!(known_host(&patterns, "git12.example", 2222, other), Verdict::Unknown, "? is one character");
        assert_eq!(known_host(&patterns, "git1.example", 22, other), Verdict::Unknown);

        // A revoked key is refused even where another line lists it; markers are not
        // host patterns.
        let revoked =
            format!("{patterns}@revoked * ssh-ed25519 {}\n@cert-authority * ssh-ed25519 {}\n", b64(key), b64(other));
        assert_eq!(known_host(&revoked, "a.git.example", 22, key), Verdict::Revoked);
        assert_eq!(known_host(&revoked, "git1.example", 2222, other), Verdict::Known);
        assert_eq!(known_host(&revoked, "elsewhere", 22, other), Verdict::Unknown, "@cert-authority is not a host key");
        assert_eq!(ssh_port("ssh://git@127.0.0.1:2222/srv/fleet.git"), 2222);
        assert_eq!(ssh_port("ssh://git@host/srv/fleet.git"), 22);
        assert_eq!(ssh_port("git@host:org/fleet.git"), 22);
        assert!(
            crate::git::is_url("git@host:org/fleet.git")
                && crate::git::is_url("https://h/r.git")
                && !crate::git::is_url("/srv/fleet")
        );
    }
}
