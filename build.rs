//! Build script: the version string `--version` prints, naming the git commit the binary is
//! built from. Outside a git checkout (a source tarball) it is the version alone, unless
//! `CKS_DRIFT_COMMIT` names the commit.

use std::path::Path;
use std::process::Command;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let version = std::env::var("CARGO_PKG_VERSION").expect("cargo sets CARGO_PKG_VERSION");
    println!("cargo:rerun-if-env-changed=CKS_DRIFT_COMMIT");
    println!("cargo:rerun-if-changed=build.rs");
    let given = std::env::var("CKS_DRIFT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty());
    let commit = given.or_else(|| git_commit(Path::new(&manifest_dir)));
    let suffix = commit.map(|c| format!(" (commit {c})")).unwrap_or_default();
    println!("cargo:rustc-env=CKS_DRIFT_VERSION={version}{suffix}");
}

/// The checkout's commit, or `None` when the sources are not the top of a git work tree (a
/// tarball unpacked inside another repository must not take that repository's commit). The
/// files that move with HEAD are watched, so a new commit refreshes the version; only files
/// that exist are named, since a missing one would rerun this script on every build.
fn git_commit(dir: &Path) -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .ok()
            .filter(|o| o.status.success())?;
        Some(String::from_utf8(out.stdout).ok()?.trim().to_string())
    };
    let top = git(&["rev-parse", "--show-toplevel"])?;
    if Path::new(&top).canonicalize().ok()? != dir.canonicalize().ok()? {
        return None;
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            let path = dir.join(path);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    Some(commit)
}
