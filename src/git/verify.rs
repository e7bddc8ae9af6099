//! Trusted history: a commit is applied only if it carries a signature by a trusted
//! key, checked as Git checks it. SSH signatures (`gpg.format ssh`) against an
//! allowed-signers file, with `ssh-keygen -Y find-principals` and `-Y verify` in
//! namespace `git`; OpenPGP signatures against a keyring, with `gpg --verify` in a
//! throwaway home that holds only that keyring. The write-back signs its commits with
//! SSH (`ssh-keygen -Y sign`), so verification and write-back work together.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use git2::{Oid, Repository};

/// Why a commit is not trusted. Never quotes signature or commit content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unverified {
    /// The commit has no signature at all.
    #[error("commit {0} is not signed")]
    Unsigned(Oid),
    /// Signed in a format no trusted keys were given for.
    #[error("commit {0} is signed with {1}, but no {2} was given to check it")]
    NoKeysFor(Oid, &'static str, &'static str),
    /// No allowed signer made the signature.
    #[error("commit {0} is signed by a key that is not in the allowed signers file")]
    UnknownKey(Oid),
    /// The signature does not match the commit.
    #[error("commit {0}: the signature does not verify ({1})")]
    Invalid(Oid, String),
    /// `ssh-keygen` or `gpg` could not be run.
    #[error("cannot verify: {0}")]
    Tool(String),
    /// The commit could not be read.
    #[error("commit {0}: {1}")]
    Read(Oid, String),
}

/// Checks commits against trusted keys: an allowed-signers file (`ssh-keygen`'s format:
/// `principals [options] keytype key`) for SSH signatures, an OpenPGP keyring (armored
/// or binary, as `gpg --export` writes it) for OpenPGP ones.
#[derive(Debug, Clone, Default)]
pub struct Verifier {
    allowed_signers: Option<PathBuf>,
    keyring: Option<PathBuf>,
}

const SSH_SIGNATURE: &str = "-----BEGIN SSH SIGNATURE-----";
const PGP_SIGNATURE: &str = "-----BEGIN PGP SIGNATURE-----";

impl Verifier {
    /// A verifier trusting the keys of `allowed_signers` (SSH) and `keyring` (OpenPGP);
    /// `None` when neither is given.
    pub fn new(allowed_signers: Option<PathBuf>, keyring: Option<PathBuf>) -> Option<Self> {
        (allowed_signers.is_some() || keyring.is_some()).then_some(Self { allowed_signers, keyring })
    }

    /// Who signed `commit` (an SSH principal, or an OpenPGP key fingerprint), if a
    /// trusted key did.
    pub fn verify(&self, repo: &Repository, commit: Oid) -> Result<String, Unverified> {
        let (signature, signed) = match repo.extract_signature(&commit, None) {
            Ok(found) => found,
            Err(e) if e.code() == git2::ErrorCode::NotFound => return Err(Unverified::Unsigned(commit)),
            Err(e) => return Err(Unverified::Read(commit, e.message().to_owned())),
        };
        let signature = std::str::from_utf8(&signature).unwrap_or_default();
        let mut file = tempfile::NamedTempFile::new().map_err(|e| Unverified::Tool(e.to_string()))?;
        file.write_all(signature.as_bytes()).map_err(|e| Unverified::Tool(e.to_string()))?;
        match (signature.trim_start(), &self.allowed_signers, &self.keyring) {
            (s, Some(allowed), _) if s.starts_with(SSH_SIGNATURE) => ssh(allowed, commit, file.path(), &signed),
            (s, None, _) if s.starts_with(SSH_SIGNATURE) => {
                Err(Unverified::NoKeysFor(commit, "an SSH key", "--verify-commits allowed-signers file"))
            }
            (_, _, Some(keyring)) if signature.trim_start().starts_with(PGP_SIGNATURE) => {
                openpgp(keyring, commit, file.path(), &signed)
            }
            _ => Err(Unverified::NoKeysFor(commit, "OpenPGP (or an unknown format)", "--verify-commits-keyring")),
        }
    }
}

/// An SSH signature: the principal an allowed signer's key names.
fn ssh(allowed: &Path, commit: Oid, sig: &Path, signed: &[u8]) -> Result<String, Unverified> {
    let found = ssh_keygen(&["-Y", "find-principals", "-f", path(allowed), "-s", path(sig)], None)?;
    let Some(principal) = found.stdout.lines().next().filter(|_| found.ok).map(str::to_owned) else {
        return Err(Unverified::UnknownKey(commit));
    };
    let args = ["-Y", "verify", "-f", path(allowed), "-I", &principal, "-n", "git", "-s", path(sig)];
    let checked = ssh_keygen(&args, Some(signed))?;
    if checked.ok { Ok(principal) } else { Err(Unverified::Invalid(commit, first_line(&checked.stderr).to_owned())) }
}

/// An OpenPGP signature: the fingerprint of the keyring's key that made it. gpg runs in
/// a throwaway home holding only the keyring, so no other key on the machine counts.
fn openpgp(keyring: &Path, commit: Oid, sig: &Path, signed: &[u8]) -> Result<String, Unverified> {
    let home = tempfile::tempdir().map_err(|e| Unverified::Tool(e.to_string()))?;
    let gpg = |args: &[&str], stdin: Option<&[u8]>| {
        let mut all = vec!["--homedir", path(home.path()), "--batch", "--no-tty", "--trust-model", "always"];
        all.extend_from_slice(args);
        run("gpg", "gnupg", &all, stdin)
    };
    let imported = gpg(&["--import", path(keyring)], None)?;
    if !imported.ok {
        return Err(Unverified::Tool(format!("the keyring does not import: {}", first_line(&imported.stderr))));
    }
    let checked = gpg(&["--status-fd", "1", "--verify", path(sig), "-"], Some(signed))?;
    let status =
        |tag: &str| checked.stdout.lines().find_map(|l| l.strip_prefix(&format!("[GNUPG:] {tag} ")).map(str::to_owned));
    match (status("VALIDSIG"), status("NO_PUBKEY"), status("BADSIG")) {
        (Some(valid), _, None) if checked.ok => Ok(valid.split(' ').next().unwrap_or_default().to_owned()),
        (_, Some(_), _) => Err(Unverified::UnknownKey(commit)),
        _ => Err(Unverified::Invalid(commit, first_line(&checked.stderr).to_owned())),
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("rejected")
}

/// Signs commit content as `git commit -S` does with `gpg.format ssh`: an SSH signature
/// in namespace `git`, made with the private key at `key`.
pub fn sign(key: &Path, content: &[u8]) -> Result<String, Unverified> {
    let signed = ssh_keygen(&["-Y", "sign", "-f", path(key), "-n", "git", "-q"], Some(content))?;
    if signed.ok && signed.stdout.contains(SSH_SIGNATURE) {
        Ok(signed.stdout)
    } else {
        Err(Unverified::Tool(format!("signing failed: {}", signed.stderr.lines().next().unwrap_or("no output"))))
    }
}

struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

/// Runs `ssh-keygen` with `stdin` (or nothing) as input.
fn ssh_keygen(args: &[&str], stdin: Option<&[u8]>) -> Result<Ran, Unverified> {
    run("ssh-keygen", "openssh-client", args, stdin)
}

/// Runs `program` (from Debian's `package`) with `stdin` (or nothing) as input.
fn run(program: &str, package: &str, args: &[&str], stdin: Option<&[u8]>) -> Result<Ran, Unverified> {
    let missing = |e: std::io::Error| Unverified::Tool(format!("cannot run {program} (install {package}): {e}"));
    let mut child = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(missing)?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input).map_err(|e| Unverified::Tool(e.to_string()))?;
    }
    let out = child.wait_with_output().map_err(|e| Unverified::Tool(e.to_string()))?;
    Ok(Ran {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key pair made by ssh-keygen, and an allowed-signers file trusting it.
    fn key(dir: &Path, name: &str) -> (PathBuf, String) {
        let key = dir.join(name);
        let made = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f", path(&key)])
            .status()
            .expect("ssh-keygen (openssh-client) is installed");
        assert!(made.success());
        let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
        (key, format!("{name}@example.invalid namespaces=\"git\" {}", public.trim()))
    }

    fn commit(repo: &Repository, signing_key: Option<&Path>) -> Oid {
        let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
        let tree = repo.find_tree(repo.treebuilder(None).unwrap().write().unwrap()).unwrap();
        let content = repo.commit_create_buffer(&sig, &sig, "m", &tree, &[]).unwrap();
        match signing_key {
            Some(key) => {
                let signature = sign(key, &content).unwrap();
                repo.commit_signed(std::str::from_utf8(&content).unwrap(), &signature, None).unwrap()
            }
            None => repo.commit(None, &sig, &sig, "m", &tree, &[]).unwrap(),
        }
    }

    #[test]
    fn only_commits_signed_by_an_allowed_key_verify() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path().join("repo")).unwrap();
        let (trusted, line) = key(dir.path(), "trusted");
        let (stranger, _) = key(dir.path(), "stranger");
        let allowed = dir.path().join("allowed_signers");
        std::fs::write(&allowed, format!("{line}\n")).unwrap();
        let verifier = Verifier::new(Some(allowed), None).unwrap();

        let good = commit(&repo, Some(&trusted));
        assert_eq!(verifier.verify(&repo, good).unwrap(), "trusted@example.invalid");
        let unsigned = commit(&repo, None);
        assert_eq!(verifier.verify(&repo, unsigned), Err(Unverified::Unsigned(unsigned)));
        let foreign = commit(&repo, Some(&stranger));
        assert_eq!(verifier.verify(&repo, foreign), Err(Unverified::UnknownKey(foreign)));
    }

    /// A gpg home with a fresh signing key for `email`; its public key exported to
    /// `keyring` when given.
    fn gpg_key(home: &Path, email: &str, keyring: Option<&Path>) {
        let gpg = |args: &[&str]| {
            let out = Command::new("gpg")
                .args(["--homedir", path(home), "--batch", "--no-tty", "--passphrase", ""])
                .args(args)
                .output()
                .expect("gpg (gnupg) is installed");
            assert!(out.status.success(), "gpg {args:?}: {}", String::from_utf8_lossy(&out.stderr));
            out.stdout
        };
        std::fs::create_dir_all(home).unwrap();
        std::fs::set_permissions(home, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        gpg(&["--pinentry-mode", "loopback", "--quick-gen-key", email, "ed25519", "sign", "never"]);
        if let Some(keyring) = keyring {
            std::fs::write(keyring, gpg(&["--armor", "--export", email])).unwrap();
        }
    }

    /// A commit signed by gpg from `home`, as `git commit -S` makes one.
    fn gpg_commit(repo: &Repository, home: &Path) -> Oid {
        let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
        let tree = repo.find_tree(repo.treebuilder(None).unwrap().write().unwrap()).unwrap();
        let content = repo.commit_create_buffer(&sig, &sig, "m", &tree, &[]).unwrap();
        let mut child = Command::new("gpg")
            .args(["--homedir", path(home), "--batch", "--no-tty", "--pinentry-mode", "loopback", "--passphrase", ""])
            .args(["--armor", "--detach-sign"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&content).unwrap();
        let signature = String::from_utf8(child.wait_with_output().unwrap().stdout).unwrap();
        repo.commit_signed(std::str::from_utf8(&content).unwrap(), &signature, None).unwrap()
    }

    #[test]
    fn openpgp_signatures_verify_against_the_keyring_only() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path().join("repo")).unwrap();
        let keyring = dir.path().join("keyring.asc");
        gpg_key(&dir.path().join("release"), "release@example.invalid", Some(&keyring));
        gpg_key(&dir.path().join("stranger"), "stranger@example.invalid", None);
        let verifier = Verifier::new(None, Some(keyring)).unwrap();

        let good = gpg_commit(&repo, &dir.path().join("release"));
        let fingerprint = verifier.verify(&repo, good).unwrap();
        assert_eq!(fingerprint.len(), 40, "{fingerprint}");
        let foreign = gpg_commit(&repo, &dir.path().join("stranger"));
        assert_eq!(verifier.verify(&repo, foreign), Err(Unverified::UnknownKey(foreign)));
        let unsigned = commit(&repo, None);
        assert_eq!(verifier.verify(&repo, unsigned), Err(Unverified::Unsigned(unsigned)));
        // An SSH-signed commit with only a keyring configured is refused by name.
        let (ssh_key, _) = key(dir.path(), "ssh");
        let ssh_signed = commit(&repo, Some(&ssh_key));
        assert!(matches!(verifier.verify(&repo, ssh_signed), Err(Unverified::NoKeysFor(..))));
    }
}
