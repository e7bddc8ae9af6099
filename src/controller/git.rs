//! The watched repository: a remote fetched incrementally into an on-disk bare cache,
//! or a local repository read in place. Either way the controller reads revisions from
//! Git's object database, never from a working tree.

use std::path::{Path, PathBuf};

use git2::{CertificateCheckStatus, Cred, CredentialType, FetchOptions, Oid, RemoteCallbacks, Repository};

/// Files to commit: repo-relative path and content.
pub type Files = Vec<(String, Vec<u8>)>;

/// Where revisions come from.
pub struct Watched {
    repo: Repository,
    /// The remote URL, when fetching.
    url: Option<String>,
    branch: String,
    auth: GitAuth,
}

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

/// Why a revision could not be fetched.
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct FetchError {
    what: String,
    #[source]
    source: git2::Error,
}

fn failed(what: impl Into<String>) -> impl FnOnce(git2::Error) -> FetchError {
    let what = what.into();
    move |source| FetchError { what, source }
}

impl Watched {
    /// A local repository path is read in place; anything with a URL scheme (`file://`,
    /// `git://`) is fetched into a bare cache under `cache`.
    pub fn open(repo: &str, branch: &str, cache: &Path, auth: GitAuth) -> Result<Self, FetchError> {
        if !is_url(repo) {
            let opened = Repository::open(repo).map_err(failed(format!("{repo} is not a Git repository")))?;
            return Ok(Self { repo: opened, url: None, branch: branch.to_owned(), auth });
        }
        let dir = cache.join(cache_name(repo));
        let opened = match Repository::open_bare(&dir) {
            Ok(r) => r,
            Err(_) => {
                std::fs::create_dir_all(&dir).map_err(|e| FetchError {
                    what: format!("cannot create the cache {}", dir.display()),
                    source: git2::Error::from_str(&e.to_string()),
                })?;
                Repository::init_bare(&dir).map_err(failed(format!("cannot create the cache {}", dir.display())))?
            }
        };
        Ok(Self { repo: opened, url: Some(repo.to_owned()), branch: branch.to_owned(), auth })
    }

    /// The directory to read revisions from (a bare cache or the local repository).
    pub fn path(&self) -> PathBuf {
        self.repo.path().to_path_buf()
    }

    /// Fetches the branch (for remotes) and returns its head commit. Every fetch adds a
    /// pack to the cache and libgit2 keeps every pack open, so once packs pile up the
    /// cache is compacted into one.
    pub fn head(&mut self) -> Result<Oid, FetchError> {
        let local = format!("refs/remotes/origin/{}", self.branch);
        if let Some(url) = &self.url {
            let mut remote =
                self.repo.remote_anonymous(url).map_err(failed(format!("invalid remote {}", redact(url))))?;
            let refspec = format!("+refs/heads/{}:{local}", self.branch);
            let mut options = FetchOptions::new();
            options.remote_callbacks(self.auth.callbacks(url));
            remote.fetch(&[refspec.as_str()], Some(&mut options), None).map_err(failed(format!(
                "fetching {} from {}",
                self.branch,
                redact(url)
            )))?;
        }
        let reference = if self.url.is_some() { local } else { format!("refs/heads/{}", self.branch) };
        let oid = self.repo.refname_to_id(&reference).map_err(failed(format!("branch {} not found", self.branch)))?;
        if self.url.is_some() && packs(&self.pack_dir()).len() > MAX_PACKS {
            self.compact(oid).map_err(failed("compacting the repository cache"))?;
        }
        Ok(oid)
    }

    fn pack_dir(&self) -> PathBuf {
        self.repo.path().join("objects").join("pack")
    }

    /// Writes one pack with everything reachable from `head`, removes the others, and
    /// reopens the cache so libgit2 lets go of them. Objects of rewritten history go.
    fn compact(&mut self, head: Oid) -> Result<(), git2::Error> {
        let dir = self.pack_dir();
        let old = packs(&dir);
        let kept = {
            let mut builder = self.repo.packbuilder()?;
            let mut walk = self.repo.revwalk()?;
            walk.push(head)?;
            builder.insert_walk(&mut walk)?;
            builder.write(&dir, 0o644)?;
            builder.name()?.map(|n| format!("pack-{n}"))
        };
        for pack in old.iter().filter(|p| kept.as_deref() != p.file_stem().and_then(|s| s.to_str())) {
            for ext in ["pack", "idx", "rev", "keep"] {
                let _ = std::fs::remove_file(pack.with_extension(ext));
            }
        }
        let path = self.repo.path().to_path_buf();
        self.repo = Repository::open_bare(path)?;
        Ok(())
    }

    /// Commits the files `change` returns on top of the branch head and pushes the commit
    /// (a fast-forward, never a force). When the push is refused because the branch
    /// moved, fetches the new head and calls `change` again on it, backing off between
    /// `attempts`. `change` returning `None` means there is nothing to write.
    pub fn commit_on_head(
        &mut self,
        author: (&str, &str),
        message: &str,
        attempts: u32,
        mut change: impl FnMut(&Path, Oid) -> Result<Option<Files>, String>,
    ) -> Result<Option<Oid>, String> {
        let Some(url) = self.url.clone() else {
            return Err("writing back needs a remote repository (--repo with a URL): committing into a local \
                        repository's branch would leave its checkout behind"
                .into());
        };
        let mut last = String::new();
        for attempt in 0..attempts {
            if attempt > 0 {
                std::thread::sleep(std::time::Duration::from_millis(200 << attempt.min(5)));
            }
            let head = self.head().map_err(|e| format!("{:#}", anyhow::Error::new(e)))?;
            let Some(files) = change(self.repo.path(), head)? else { return Ok(None) };
            let commit = self.commit(head, author, message, &files).map_err(|e| format!("committing: {e}"))?;
            match self.push(&url, commit) {
                Ok(()) => return Ok(Some(commit)),
                Err(why) => {
                    tracing::warn!(attempt = attempt + 1, reason = %why, "push refused; redoing the change on the new head");
                    last = why;
                }
            }
        }
        Err(format!("push refused {attempts} times; last: {last}"))
    }

    fn commit(&self, head: Oid, author: (&str, &str), message: &str, files: &Files) -> Result<Oid, git2::Error> {
        let parent = self.repo.find_commit(head)?;
        let tree = parent.tree()?;
        let mut update = git2::build::TreeUpdateBuilder::new();
        for (path, content) in files {
            let blob = self.repo.blob(content)?;
            let mode = tree.get_path(Path::new(path)).map(|e| e.filemode()).unwrap_or(0o100644);
            update.upsert(
                path.as_str(),
                blob,
                if mode == 0o100755 { git2::FileMode::BlobExecutable } else { git2::FileMode::Blob },
            );
        }
        let new_tree = self.repo.find_tree(update.create_updated(&self.repo, &tree)?)?;
        let signature = git2::Signature::now(author.0, author.1)?;
        self.repo.commit(None, &signature, &signature, message, &new_tree, &[&parent])
    }

    fn push(&self, url: &str, commit: Oid) -> Result<(), String> {
        let local = "refs/flotilla/writeback";
        self.repo.reference(local, commit, true, "write-back").map_err(|e| e.to_string())?;
        let refused = std::cell::RefCell::new(None::<String>);
        let mut remote = self.repo.remote_anonymous(url).map_err(|e| e.to_string())?;
        let mut callbacks = self.auth.callbacks(url);
        callbacks.push_update_reference(|_, status| {
            if let Some(status) = status {
                *refused.borrow_mut() = Some(status.to_owned());
            }
            Ok(())
        });
        let mut options = git2::PushOptions::new();
        options.remote_callbacks(callbacks);
        let refspec = format!("{local}:refs/heads/{}", self.branch);
        remote.push(&[refspec.as_str()], Some(&mut options)).map_err(|e| e.message().to_owned())?;
        drop(options);
        match refused.into_inner() {
            Some(status) => Err(status),
            None => Ok(()),
        }
    }

    /// Whether `new` descends from `old`; false means history was rewritten.
    pub fn descends(&self, new: Oid, old: Oid) -> bool {
        new == old || self.repo.graph_descendant_of(new, old).unwrap_or(false)
    }
}

/// A remote URL (`https://`, `ssh://`, `git://`, `file://`, or scp-like `user@host:path`)
/// rather than a local path.
pub fn is_url(repo: &str) -> bool {
    repo.contains("://") || (!repo.starts_with('/') && repo.split_once(':').is_some_and(|(h, _)| h.contains('@')))
}

/// Packs in the cache before it is compacted.
const MAX_PACKS: usize = 16;

/// The `.pack` files of a pack directory.
fn packs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "pack"))
                .collect()
        })
        .unwrap_or_default()
}

/// A stable directory name for a URL's cache.
fn cache_name(url: &str) -> String {
    let hash = git2::Oid::hash_object(git2::ObjectType::Blob, url.as_bytes()).expect("hashing in memory cannot fail");
    format!("repo-{}", &hash.to_string()[..16])
}

/// Drops credentials from a URL before it reaches a message or log.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => format!("{}://***@{}", &url[..scheme], &url[at + 1..]),
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commits `content` as `fleet.yaml` on `main` of the bare repository at `remote`.
    fn commit(remote: &Repository, content: &str) -> Oid {
        let blob = remote.blob(content.as_bytes()).unwrap();
        let mut tree = remote.treebuilder(None).unwrap();
        tree.insert("fleet.yaml", blob, 0o100644).unwrap();
        let tree = remote.find_tree(tree.write().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
        let parent = remote.refname_to_id("refs/heads/main").ok().map(|id| remote.find_commit(id).unwrap());
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        remote.commit(Some("refs/heads/main"), &sig, &sig, content, &tree, &parents).unwrap()
    }

    #[test]
    fn the_fetch_cache_is_compacted_and_stays_readable() {
        let dir = tempfile::tempdir().unwrap();
        let remote = Repository::init_bare(dir.path().join("remote.git")).unwrap();
        let url = format!("file://{}", dir.path().join("remote.git").display());
        let mut watched = Watched::open(&url, "main", &dir.path().join("cache"), GitAuth::default()).unwrap();
        let mut last = None;
        for i in 0..40 {
            let id = commit(&remote, &format!("revision {i}"));
            assert_eq!(watched.head().unwrap(), id);
            last = Some(id);
        }
        assert!(packs(&watched.pack_dir()).len() <= MAX_PACKS + 1, "{} packs", packs(&watched.pack_dir()).len());
        let commit = watched.repo.find_commit(last.unwrap()).unwrap();
        let blob = commit.tree().unwrap().get_name("fleet.yaml").unwrap().to_object(&watched.repo).unwrap();
        assert_eq!(blob.as_blob().unwrap().content(), b"revision 39");
        assert!(watched.descends(last.unwrap(), commit.parent_id(0).unwrap()));
    }

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
        assert!(is_url("git@host:org/fleet.git") && is_url("https://h/r.git") && !is_url("/srv/fleet"));
    }

    #[test]
    fn credentials_never_reach_messages() {
        assert_eq!(redact("https://user:token@git.example/r.git"), "https://***@git.example/r.git");
        assert_eq!(redact("git://host/r.git"), "git://host/r.git");
    }
}
