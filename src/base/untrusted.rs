//! Tenant text made safe to show a person: cluster names, node names, VM details and command
//! output come from the tenant, so every control character, and every invisible format or
//! separator character, is written as a visible escape (`\x1b`, `\u{9b}`, `\u{202e}`) and a
//! text can be bounded. A leaf: it knows nothing of CloudStack.

use std::borrow::Cow;

/// `s` with every control character (C0 and DEL, line breaks and tabs included, and C1) and
/// every format or separator character (see [`is_hidden`]) written as `\xNN` or `\u{NNNN}`,
/// and a backslash as `\\` so that an escape cannot be forged. Borrowed when nothing needs
/// escaping.
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
        .any(|c| needs_escape(c) || (backslash && c == '\\'))
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
        c if needs_escape(c) => {
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

fn needs_escape(c: char) -> bool {
    c.is_control() || is_hidden(c)
}

/// Unicode general categories Cf (format), Zl (line separator) and Zp (paragraph separator),
/// as of Unicode 16.0, in code point order. They are invisible or move text: U+202E turns what
/// follows right to left (`gnp.exe` shown as `exe.png`), U+2028 and U+2029 break a line in
/// many viewers (a forged log line), U+200B and U+FEFF hide inside a name that looks like
/// another. `char::is_control` covers Cc only, and no Unicode-category crate is in the tree.
const HIDDEN: &[(char, char)] = &[
    ('\u{ad}', '\u{ad}'),       // soft hyphen
    ('\u{600}', '\u{605}'),     // Arabic number signs
    ('\u{61c}', '\u{61c}'),     // Arabic letter mark
    ('\u{6dd}', '\u{6dd}'),     // Arabic end of ayah
    ('\u{70f}', '\u{70f}'),     // Syriac abbreviation mark
    ('\u{890}', '\u{891}'),     // Arabic pound and piastre marks above
    ('\u{8e2}', '\u{8e2}'),     // Arabic disputed end of ayah
    ('\u{180e}', '\u{180e}'),   // Mongolian vowel separator
    ('\u{200b}', '\u{200f}'),   // zero width space, joiners, LRM, RLM
    ('\u{2028}', '\u{2028}'),   // line separator (Zl)
    ('\u{2029}', '\u{2029}'),   // paragraph separator (Zp)
    ('\u{202a}', '\u{202e}'),   // bidirectional embeddings and overrides
    ('\u{2060}', '\u{2064}'),   // word joiner, invisible operators
    ('\u{2066}', '\u{206f}'),   // bidirectional isolates, deprecated format characters
    ('\u{feff}', '\u{feff}'),   // zero width no-break space (byte order mark)
    ('\u{fff9}', '\u{fffb}'),   // interlinear annotation
    ('\u{110bd}', '\u{110bd}'), // Kaithi number sign
    ('\u{110cd}', '\u{110cd}'), // Kaithi number sign above
    ('\u{13430}', '\u{1343f}'), // Egyptian hieroglyph format controls
    ('\u{1bca0}', '\u{1bca3}'), // shorthand format controls
    ('\u{1d173}', '\u{1d17a}'), // musical symbol beam and phrase controls
    ('\u{e0001}', '\u{e0001}'), // language tag
    ('\u{e0020}', '\u{e007f}'), // tag characters
];

/// Whether `c` is of category Cf, Zl or Zp: invisible, or a line break `is_control` misses.
pub fn is_hidden(c: char) -> bool {
    HIDDEN
        .binary_search_by(|&(first, last)| {
            if last < c {
                std::cmp::Ordering::Less
            } else if first > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
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

/// JSON text (from `serde_json`) with every hidden character (see [`is_hidden`]) written as
/// a `\uNNNN` escape. JSON's own structure is ASCII, so such a character can only be inside
/// a string, where the escape means the same character to any JSON reader; what changes is
/// that a person reading the text raw (`grep`, `less`, `jq -c`'s input) sees it.
pub fn json_visible(json: String) -> String {
    if !json.chars().any(is_hidden) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_hidden(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
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
    fn format_characters_are_escaped() {
        // Cf: a right-to-left override that would show "gnp.exe" as "exe.png", a zero width
        // space and a byte order mark hidden in a name, a soft hyphen, a tag character.
        assert_eq!(escaped("report\u{202e}gnp.exe"), "report\\u{202e}gnp.exe");
        assert_eq!(escaped("web\u{200b}-1\u{feff}"), "web\\u{200b}-1\\u{feff}");
        assert_eq!(escaped("a\u{ad}b"), "a\\xadb");
        assert_eq!(escaped("\u{e0041}\u{2066}"), "\\u{e0041}\\u{2066}");
        assert_eq!(controls_escaped("x\u{202e}\\"), "x\\u{202e}\\");
    }

    #[test]
    fn line_and_paragraph_separators_are_escaped() {
        // Zl and Zp break a line in many viewers: a forged log line otherwise.
        assert_eq!(
            escaped("web\u{2028}2026-11-30T10:00:00Z ERROR forged"),
            "web\\u{2028}2026-11-30T10:00:00Z ERROR forged"
        );
        assert_eq!(escaped("a\u{2029}b"), "a\\u{2029}b");
        assert_eq!(shown("\u{2028}\u{2029}", 9), "\\u{2028}…");
    }

    #[test]
    fn the_table_holds_exactly_the_categories() {
        // Sorted and disjoint, as the binary search needs.
        assert!(HIDDEN.windows(2).all(|w| w[0].1 < w[1].0));
        assert!(HIDDEN.iter().all(|(a, b)| a <= b));
        // Both ends of every range, and their neighbours outside it.
        for &(first, last) in HIDDEN {
            assert!(is_hidden(first) && is_hidden(last), "{first:?}..{last:?}");
        }
        for c in [
            'a',
            ' ',
            '\u{ac}',
            '\u{ae}',
            '\u{200a}',
            '\u{2010}',
            '\u{2027}',
            '\u{202f}',
            '\u{205f}',
            '\u{2065}',
            '\u{fefe}',
            '\u{ff00}',
            '\u{e0000}',
            '\u{e0080}',
            'É',
            '🚀',
        ] {
            assert!(!is_hidden(c), "{c:?}");
        }
        // 170 Cf, one Zl, one Zp in Unicode 16.0.
        let count: u32 = HIDDEN
            .iter()
            .map(|&(a, b)| u32::from(b) - u32::from(a) + 1)
            .sum();
        assert_eq!(count, 172);
    }

    #[test]
    fn shown_bounds_the_text() {
        assert_eq!(shown("abcdef", 6), "abcdef");
        assert_eq!(shown("abcdef", 4), "abc…");
        assert_eq!(shown("\x1b\x1b", 5), "\\x1b…");
    }

    #[test]
    fn hidden_characters_in_json_strings_are_escaped_and_read_back_the_same() {
        let text = "a\u{202e}gnp.exe\u{2028}b\u{e0001}c \u{e9}";
        let json = serde_json::to_string(&serde_json::json!({ "name": text })).unwrap();
        let visible = json_visible(json);
        assert_eq!(
            visible,
            "{\"name\":\"a\\u202egnp.exe\\u2028b\\udb40\\udc01c \u{e9}\"}"
        );
        let back: serde_json::Value = serde_json::from_str(&visible).unwrap();
        assert_eq!(back["name"], text);
    }
}
