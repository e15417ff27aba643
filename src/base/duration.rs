//! Durations as people write them in the config and read them in messages: `parse_duration`
//! reads `30s` or `1h30m`, `human_duration` and `human_elapsed` print them back.

use std::time::Duration;

/// A duration as people write it in the config: `0s`, `1m30s`, `5m`, `1h30m`, `7d`, `250ms`
/// (whole milliseconds below a second, or when a second is not whole).
pub fn human_duration(d: Duration) -> String {
    let mut secs = d.as_secs();
    if d.subsec_nanos() != 0 {
        return format!("{}ms", d.as_millis());
    }
    if secs == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
        if secs >= size {
            out.push_str(&format!("{}{unit}", secs / size));
            secs %= size;
        }
    }
    out
}

/// A measured duration, rounded as people would say it: `340ms`, `1.5s`, `12s`, `5m12s`.
pub fn human_elapsed(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d < Duration::from_secs(60) {
        let tenths = (d.as_millis() + 50) / 100;
        match tenths % 10 {
            0 => format!("{}s", tenths / 10),
            t => format!("{}.{t}s", tenths / 10),
        }
    } else {
        human_duration(Duration::from_secs(d.as_secs_f64().round() as u64))
    }
}

/// Why a text is not a duration; each names the text as given (trimmed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("is empty; give a number with a unit, e.g. \"30s\" or \"5m\"")]
    Empty,
    #[error("{text:?} is not a duration; use e.g. \"30s\", \"5m\", \"1h\"")]
    NotADuration { text: String },
    #[error("{text:?} has a number too large")]
    NumberTooLarge { text: String },
    #[error("{text:?} has no unit; write e.g. \"{number}s\" or \"{number}m\"")]
    NoUnit { text: String, number: u64 },
    #[error("{text:?} has an unknown unit {unit:?}; use ms, s, m, h or d")]
    UnknownUnit { text: String, unit: String },
    #[error("{text:?} is too long a duration")]
    TooLong { text: String },
}

/// Parses a duration with a unit: `500ms`, `30s`, `5m`, `1h`, `1d`, or a sum like `1h30m`.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return Err(DurationError::NotADuration { text: s.into() });
        }
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|_| DurationError::NumberTooLarge { text: s.into() })?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(|c| c.is_ascii_alphabetic()).count();
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            "h" => Duration::from_secs(n.saturating_mul(3600)),
            "d" => Duration::from_secs(n.saturating_mul(86_400)),
            "" => {
                return Err(DurationError::NoUnit {
                    text: s.into(),
                    number: n,
                });
            }
            other => {
                return Err(DurationError::UnknownUnit {
                    text: s.into(),
                    unit: other.into(),
                });
            }
        };
        total = total
            .checked_add(part)
            .ok_or_else(|| DurationError::TooLong { text: s.into() })?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172_800)));
        let shown = |s: &str| parse_duration(s).map_err(|e| e.to_string());
        assert!(shown("5").unwrap_err().contains("no unit"));
        assert_eq!(
            shown("5 min"),
            Err("\"5 min\" has no unit; write e.g. \"5s\" or \"5m\"".to_string())
        );
        assert_eq!(
            shown("m5"),
            Err("\"m5\" is not a duration; use e.g. \"30s\", \"5m\", \"1h\"".to_string())
        );
        assert!(shown("5w").unwrap_err().contains("unknown unit \"w\""));
        assert!(parse_duration("").is_err());
        assert_eq!(
            shown("18446744073709551615s1s"),
            Err("\"18446744073709551615s1s\" is too long a duration".to_string())
        );
    }

    #[test]
    fn durations_print_as_people_write_them() {
        for (d, text) in [
            (Duration::ZERO, "0s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(300), "5m"),
            (Duration::from_secs(3600), "1h"),
            (Duration::from_secs(5400), "1h30m"),
            (Duration::from_secs(86_400 + 61), "1d1m1s"),
            (Duration::from_secs(7 * 86_400), "7d"),
            (Duration::from_millis(250), "250ms"),
        ] {
            assert_eq!(human_duration(d), text);
        }
        for (d, text) in [
            (Duration::from_millis(340), "340ms"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(11_960), "12s"),
            (Duration::from_millis(312_400), "5m12s"),
        ] {
            assert_eq!(human_elapsed(d), text);
        }
    }
}
