//! The man pages and shell completions, generated from the command-line definition when the
//! packages are built (`cks-drift generate-assets DIR`), so they never disagree with the
//! binary. The definition itself belongs to `cli`, which hands it over.

use std::path::{Path, PathBuf};

use clap_complete::Shell;

/// A file that could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {}", path.display())]
pub struct AssetError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

/// Writes `man/cks-drift.1` and one page per command (`man/cks-drift-check.1`, …), and
/// `completions/cks-drift.bash`, `completions/_cks-drift` (zsh) and
/// `completions/cks-drift.fish` under `dir`. Returns the files written.
pub fn write(dir: &Path, command: clap::Command) -> Result<Vec<PathBuf>, AssetError> {
    let fail = |path: &Path| {
        let path = path.to_path_buf();
        move |source| AssetError { path, source }
    };
    let man = dir.join("man");
    let completions = dir.join("completions");
    for d in [&man, &completions] {
        std::fs::create_dir_all(d).map_err(fail(d))?;
    }
    let mut written = Vec::new();
    // `help` is clap's, not a command of ours; building names each subcommand's page as `man`
    // looks it up (`cks-drift-check`).
    let mut command = command.disable_help_subcommand(true);
    command.build();
    let source = format!(
        "{} {}",
        command.get_name(),
        command.get_version().unwrap_or_default()
    );
    let pages = std::iter::once(command.clone()).chain(
        command
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .cloned(),
    );
    for (n, page) in pages.enumerate() {
        let page = clap_mangen::Man::new(page)
            .source(source.clone())
            .manual("cks-drift manual");
        let path = man.join(page.get_filename());
        let mut text = Vec::new();
        let rendered = if n == 0 {
            top_page(&page, &mut text)
        } else {
            page.render(&mut text)
        };
        rendered.map_err(fail(&path))?;
        std::fs::write(&path, text).map_err(fail(&path))?;
        written.push(path);
    }
    // The completions offer what `--help` shows: not the hidden commands.
    let name = command.get_name().to_string();
    let mut visible = clap::Command::new(name.clone())
        .version(command.get_version().unwrap_or_default().to_string())
        .disable_help_subcommand(true)
        .subcommands(
            command
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
                .cloned(),
        );
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let path = clap_complete::generate_to(shell, &mut visible, &name, &completions)
            .map_err(fail(&completions))?;
        written.push(path);
    }
    Ok(written)
}

/// The sections of `cks-drift(1)` that are not in the clap definition, in roff.
const FILES_AND_EXIT_STATUS: &str = r#".SH FILES
.TP
\fI/etc/cks\-drift/cks\-drift.toml\fR
The configuration; every key, its default and a comment are in the file the package installs.
Check it with \fBcks\-drift validate\-config \-\-connect\fR.
.TP
\fI/var/lib/cks\-drift/\fR
\fIstate.json\fR (what was reported, and notifications not yet delivered), \fIevents.jsonl\fR
(the event log) and \fIknown_hosts\fR (the control nodes' host keys).
.SH "EXIT STATUS"
Of \fBcheck\fR: 0 when every checked cluster matches, 1 when mismatches are open, 2 when the
check could not run, 3 when a cluster was compared only in part.
.SH "SEE ALSO"
\fI/usr/share/doc/cks\-drift/README.md\fR, and the documents it links in
\fI/usr/share/doc/cks\-drift/docs/\fR
"#;

/// The top page: clap's sections, then files, exit status and where the rest is.
fn top_page(page: &clap_mangen::Man, out: &mut Vec<u8>) -> std::io::Result<()> {
    page.render_title(out)?;
    page.render_name_section(out)?;
    page.render_synopsis_section(out)?;
    page.render_description_section(out)?;
    page.render_options_section(out)?;
    page.render_subcommands_section(out)?;
    out.extend_from_slice(FILES_AND_EXIT_STATUS.as_bytes());
    page.render_version_section(out)
}
