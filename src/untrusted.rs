//! Tenant text made safe to show a person: cluster names, node names, VM details and command
//! output come from the tenant, so every control character is written as a visible escape
//! (`\x1b`, `\u{9b}`) and a text can be bounded. A leaf: it knows nothing of CloudStack.

use std::borrow::Cow;

/// `s` with every control character (C0 and DEL, line breaks and tabs included, and C1)
/// written as `\xNN` or `\u{NNNN}`, and a backslash as `\\` so that an escape cannot be
/// forged. Borrowed when nothing needs escaping.
pub fn escaped(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

/// [`escaped`] without doubling backslashes: for a text that is escaped again later (a
/// queued CloudStack text is fitted again before it is sent), so escaping must not compound.
pub fn controls_escaped(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

fn escape(s: &str, backslash: bool) -> Cow<'_, str> {
    if !s
        .chars()
        .any(|c| c.is_control() || (backslash && c == '\\'))
    {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push_escaped(&mut out, c, backslash);
    }
    Cow::Owned(out)
}

fn push_escaped(out: &mut String, c: char, backslash: bool) {
    match c {
        '\\' if backslash => out.push_str("\\\\"),
        c if c.is_control() => {
            let n = u32::from(c);
            if n <= 0xff {
                out.push_str(&format!("\\x{n:02x}"));
            } else {
                out.push_str(&format!("\\u{{{n:04x}}}"));
            }
        }
        c => out.push(c),
    }
}

/// [`escaped`], and cut to at most `max` characters with `…` (escapes count as written).
pub fn shown(s: &str, max: usize) -> String {
    let e = escaped(s);
    if e.chars().count() <= max {
        return e.into_owned();
    }
    let mut out: String = e.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_plain_text_is_borrowed() {
        assert!(matches!(escaped("web-1"), Cow::Borrowed("web-1")));
        assert_eq!(
            escaped("web\n2026-11-30T10:00:00Z ERROR forged\x1b[2J\t\u{9b}1m"),
            "web\\x0a2026-11-30T10:00:00Z ERROR forged\\x1b[2J\\x09\\x9b1m"
        );
        assert_eq!(escaped("a\\x1b"), "a\\\\x1b");
        assert_eq!(escaped("Équipe 🚀"), "Équipe 🚀");
    }

    #[test]
    fn shown_bounds_the_text() {
        assert_eq!(shown("abcdef", 6), "abcdef");
        assert_eq!(shown("abcdef", 4), "abc…");
        assert_eq!(shown("\x1b\x1b", 5), "\\x1b…");
    }
}
