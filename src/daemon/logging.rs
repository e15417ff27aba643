//! Log output: to stderr (stdout is the report's), readable text on a terminal or JSON lines
//! for journald and log shippers. `RUST_LOG` overrides the configured level. Text logs escape
//! control characters in every field: much of what they show is tenant text.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// The filter used when neither the config nor `RUST_LOG` says otherwise.
pub const DEFAULT_FILTER: &str = "info,russh=warn,rustls_platform_verifier=off";

/// What the configured level is held to, whatever it is: russh is chatty at debug level (it
/// prints known_hosts lines), and rustls-platform-verifier logs each refused certificate as a
/// raw ERROR line, which the one-line diagnosis of the failed request already says, with
/// what to do (see `diagnose`). `RUST_LOG` is taken as given.
const HELD: &str = "russh=warn,rustls_platform_verifier=off";

/// Installs the global subscriber once; later calls do nothing.
pub fn init(level: &str, format: LogFormat) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .or_else(|| EnvFilter::try_new(format!("{level},{HELD}")).ok())
        .unwrap_or_else(|| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .try_init(),
        LogFormat::Text => builder
            .fmt_fields(escaping_fields())
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
    };
}

/// Event and span fields as the default text format writes them, with every control
/// character escaped (see `untrusted`): a cluster name, a node name or a line of a command's
/// output holding a line break or an escape sequence cannot forge a log line or rewrite the
/// terminal. JSON logs need no such care: JSON escapes them.
fn escaping_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + 'static {
    use tracing_subscriber::field::MakeExt;
    tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let text = format!("{value:?}");
        let text = crate::base::untrusted::escaped(&text);
        if field.name() == "message" {
            write!(w, "{text}")
        } else {
            write!(w, "{field}={text}")
        }
    })
    .delimited(" ")
}
