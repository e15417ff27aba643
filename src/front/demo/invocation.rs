//! How `demo --serve` spells the commands it prints: the form that runs this very binary from
//! the user's shell. It only looks at the binary's path, the source tree around it and `PATH`;
//! running anything, and serving the demo, belong elsewhere.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The name the packages install the binary under.
const NAME: &str = "cks-drift";

/// How to start this binary from a shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// What the printed commands start with: `cks-drift`, `cargo run --` or a path.
    pub program: String,
    /// The source tree that `cargo run` must be started in (none for the other forms).
    pub dir: Option<PathBuf>,
}

impl Invocation {
    /// The form for the running binary, `PATH` as this process sees it.
    pub fn of_current() -> Invocation {
        match std::env::current_exe() {
            Ok(exe) => Invocation::of(&exe, std::env::var_os("PATH").as_deref()),
            Err(_) => Invocation::plain(),
        }
    }

    /// The form for the binary at `exe`, with `path` the shell's `PATH`:
    ///
    /// - built in a source tree (`<tree>/target/<profile>/cks-drift`, `<tree>/Cargo.toml`
    ///   beside `target`): `cargo run --` in that tree, with the profile's flag. A clone has no
    ///   `cks-drift` on `PATH` (a plain `cks-drift` fails with "command not found"), and
    ///   `cargo run` also rebuilds the binary after a change to the sources, as the README
    ///   has it run from a clone;
    /// - otherwise `cks-drift` when that name on `PATH` is this binary (the packages' and
    ///   `cargo install`'s);
    /// - otherwise the binary's own path: `cks-drift` would be another binary or none, and
    ///   the config was written for this one.
    pub fn of(exe: &Path, path: Option<&OsStr>) -> Invocation {
        if let Some((tree, profile)) = source_tree(exe) {
            let program = match profile {
                "debug" => "cargo run --".to_string(),
                "release" => "cargo run --release --".to_string(),
                other => format!("cargo run --profile {other} --"),
            };
            return Invocation {
                program,
                dir: Some(tree.to_path_buf()),
            };
        }
        let found = path.and_then(|p| on_path(NAME, p));
        if found.is_some_and(|f| same_file(&f, exe)) {
            return Invocation::plain();
        }
        Invocation {
            program: shell_word(&exe.display().to_string()),
            dir: None,
        }
    }

    fn plain() -> Invocation {
        Invocation {
            program: NAME.to_string(),
            dir: None,
        }
    }
}

/// The source tree and the profile when `exe` is `<tree>/target/<profile>/<binary>` and
/// `<tree>/Cargo.toml` exists. A binary built for another target (`target/<triple>/…`) or in
/// another target directory is not matched: `cargo run` would not start that one.
fn source_tree(exe: &Path) -> Option<(&Path, &str)> {
    let profile_dir = exe.parent()?;
    let profile = profile_dir.file_name()?.to_str()?;
    let target = profile_dir.parent()?;
    if target.file_name()? != "target" {
        return None;
    }
    let tree = target.parent()?;
    tree.join("Cargo.toml").is_file().then_some((tree, profile))
}

/// The first executable file named `name` in the folders of `path`, as a shell finds it.
fn on_path(name: &str, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// `word` as a shell reads it back: as it is when it holds no special character, else in
/// single quotes.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// An executable file at `path`, its folders created.
    fn executable(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn cargo_run(program: &str, tree: &Path) -> Invocation {
        Invocation {
            program: program.to_string(),
            dir: Some(tree.to_path_buf()),
        }
    }

    #[test]
    fn a_binary_built_in_a_source_tree_is_run_with_cargo_in_that_tree() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("cks-drift");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::write(tree.join("Cargo.toml"), "").unwrap();
        for (profile, program) in [
            ("debug", "cargo run --"),
            ("release", "cargo run --release --"),
            ("dist", "cargo run --profile dist --"),
        ] {
            let exe = tree.join("target").join(profile).join("cks-drift");
            executable(&exe);
            assert_eq!(Invocation::of(&exe, None), cargo_run(program, &tree));
        }
        // Another target's build, or a target folder of another name: its own path.
        for exe in [
            tree.join("target/x86_64-unknown-linux-gnu/release/cks-drift"),
            tree.join("build/debug/cks-drift"),
        ] {
            executable(&exe);
            assert_eq!(
                Invocation::of(&exe, None).program,
                exe.display().to_string()
            );
        }
    }

    #[test]
    fn a_target_folder_without_cargo_toml_beside_it_is_no_source_tree() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("target/debug/cks-drift");
        executable(&exe);
        let shown = Invocation::of(&exe, None);
        assert_eq!(shown.program, exe.display().to_string());
        assert_eq!(shown.dir, None);
    }

    #[test]
    fn the_plain_name_only_when_path_finds_this_binary() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("opt/cks-drift");
        executable(&exe);
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        symlink(&exe, bin.join("cks-drift")).unwrap();
        let other = dir.path().join("other");
        executable(&other.join("cks-drift"));
        let path = |dirs: &[&Path]| std::env::join_paths(dirs).unwrap();

        // Found through a symbolic link on PATH: the name is enough.
        let shown = Invocation::of(&exe, Some(&path(&[&dir.path().join("none"), &bin])));
        assert_eq!(shown, Invocation::plain());
        // Another cks-drift comes first, or none is on PATH: this one's path.
        let own = exe.display().to_string();
        let shown = Invocation::of(&exe, Some(&path(&[&other, &bin])));
        assert_eq!((shown.program.as_str(), shown.dir), (own.as_str(), None));
        assert_eq!(Invocation::of(&exe, Some(OsStr::new(""))).program, own);
        assert_eq!(Invocation::of(&exe, None).program, own);
        // A file of that name that is not executable is passed over, as a shell does.
        let plain_file = dir.path().join("plain");
        std::fs::create_dir_all(&plain_file).unwrap();
        std::fs::write(plain_file.join("cks-drift"), "").unwrap();
        let shown = Invocation::of(&exe, Some(&path(&[&plain_file, &bin])));
        assert_eq!(shown, Invocation::plain());
    }

    #[test]
    fn a_path_a_shell_would_split_is_quoted() {
        assert_eq!(
            shell_word("/usr/local/bin/cks-drift"),
            "/usr/local/bin/cks-drift"
        );
        assert_eq!(shell_word("/home/a b/cks-drift"), "'/home/a b/cks-drift'");
        assert_eq!(
            shell_word("/tmp/it's/cks-drift"),
            r"'/tmp/it'\''s/cks-drift'"
        );
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("with space/cks-drift");
        executable(&exe);
        assert_eq!(
            Invocation::of(&exe, None).program,
            format!("'{}'", exe.display())
        );
    }
}
