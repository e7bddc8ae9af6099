//! Trusted history: a commit is applied only if it carries an SSH signature by a key
//! listed in an allowed-signers file (`--verify-commits`), checked as Git checks it —
//! with `ssh-keygen -Y find-principals` and `ssh-keygen -Y verify`, namespace `git`
//! (Git's own `gpg.format ssh`). The write-back signs its commits the same way
//! (`ssh-keygen -Y sign`), so verification and write-back work together.

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
    /// Signed, but not with SSH (OpenPGP signatures are not verified yet).
    #[error("commit {0} is signed, but not with an SSH key (gpg.format ssh); OpenPGP signatures are not verified yet")]
    NotSsh(Oid),
    /// No allowed signer made the signature.
    #[error("commit {0} is signed by a key that is not in the allowed signers file")]
    UnknownKey(Oid),
    /// The signature does not match the commit.
    #[error("commit {0}: the signature does not verify ({1})")]
    Invalid(Oid, String),
    /// `ssh-keygen` could not be run.
    #[error("cannot run ssh-keygen (install the openssh-client package): {0}")]
    Tool(String),
    /// The commit could not be read.
    #[error("commit {0}: {1}")]
    Read(Oid, String),
}

/// Checks commits against an allowed-signers file (`ssh-keygen`'s format: `principals
/// [options] keytype key`).
#[derive(Debug, Clone)]
pub struct Verifier {
    allowed_signers: PathBuf,
}

const SSH_SIGNATURE: &str = "-----BEGIN SSH SIGNATURE-----";

impl Verifier {
    /// A verifier trusting the keys of `allowed_signers`.
    pub fn new(allowed_signers: PathBuf) -> Self {
        Self { allowed_signers }
    }

    /// The principal whose key signed `commit`, if one of the allowed signers did.
    pub fn verify(&self, repo: &Repository, commit: Oid) -> Result<String, Unverified> {
        let (signature, signed) = match repo.extract_signature(&commit, None) {
            Ok(found) => found,
            Err(e) if e.code() == git2::ErrorCode::NotFound => return Err(Unverified::Unsigned(commit)),
            Err(e) => return Err(Unverified::Read(commit, e.message().to_owned())),
        };
        let signature = std::str::from_utf8(&signature).unwrap_or_default();
        if !signature.trim_start().starts_with(SSH_SIGNATURE) {
            return Err(Unverified::NotSsh(commit));
        }
        let mut file = tempfile::NamedTempFile::new().map_err(|e| Unverified::Tool(e.to_string()))?;
        file.write_all(signature.as_bytes()).map_err(|e| Unverified::Tool(e.to_string()))?;
        let sig = file.path();
        let found = ssh_keygen(&["-Y", "find-principals", "-f", path(&self.allowed_signers), "-s", path(sig)], None)?;
        let Some(principal) = found.stdout.lines().next().filter(|_| found.ok).map(str::to_owned) else {
            return Err(Unverified::UnknownKey(commit));
        };
        let args = ["-Y", "verify", "-f", path(&self.allowed_signers), "-I", &principal, "-n", "git", "-s", path(sig)];
        let checked = ssh_keygen(&args, Some(signed.as_ref()))?;
        if checked.ok {
            Ok(principal)
        } else {
            Err(Unverified::Invalid(commit, checked.stderr.lines().next().unwrap_or("rejected").to_owned()))
        }
    }
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
    let mut child = Command::new("ssh-keygen")
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Unverified::Tool(e.to_string()))?;
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
        let verifier = Verifier::new(allowed);

        let good = commit(&repo, Some(&trusted));
        assert_eq!(verifier.verify(&repo, good).unwrap(), "trusted@example.invalid");
        let unsigned = commit(&repo, None);
        assert_eq!(verifier.verify(&repo, unsigned), Err(Unverified::Unsigned(unsigned)));
        let foreign = commit(&repo, Some(&stranger));
        assert_eq!(verifier.verify(&repo, foreign), Err(Unverified::UnknownKey(foreign)));
    }
}
