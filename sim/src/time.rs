//! The simulated management server's clock: whole seconds since the Unix epoch, UTC, written
//! and read in CloudStack's date forms (`2024-06-05T07:51:22+0000`).
//!
//! The simulator keeps a type of its own rather than the checker's, so that a date bug in the
//! checker cannot be agreed with by the server it is tested against. Only [`SimTime::now`]
//! reads the system clock (the HTTP server needs it to check `expires`); the world's clock is
//! whatever its builder sets.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// An instant of the simulated cloud, in whole seconds (CloudStack's dates have no fraction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime {
    unix_secs: i64,
}

const SECS_PER_DAY: i64 = 86_400;
/// Every 400 Gregorian years have the same number of days, wherever they start.
const DAYS_PER_400_YEARS: i64 = 146_097;

impl SimTime {
    pub const fn from_unix(secs: i64) -> SimTime {
        SimTime { unix_secs: secs }
    }

    /// The system clock, truncated to the second.
    pub fn now() -> SimTime {
        let secs = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(after) => after.as_secs() as i64,
            Err(before) => -(before.duration().as_secs() as i64),
        };
        SimTime::from_unix(secs)
    }

    pub const fn unix(self) -> i64 {
        self.unix_secs
    }

    /// `d` later, in whole seconds (saturating).
    pub fn plus(self, d: Duration) -> SimTime {
        let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        SimTime::from_unix(self.unix_secs.saturating_add(secs))
    }

    /// `d` earlier, in whole seconds (saturating).
    pub fn minus(self, d: Duration) -> SimTime {
        let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        SimTime::from_unix(self.unix_secs.saturating_sub(secs))
    }

    /// Reads a date as the management server takes it, or `None`.
    ///
    /// `expires` goes through `DateUtil.parseTZDateString`
    /// (utils/src/main/java/com/cloud/utils/DateUtil.java): `yyyy-MM-dd'T'HH:mm:ss` with an
    /// offset (`Z`, `+hhmm` or `+hh:mm`), fractional seconds allowed. The `DATE` parameters of
    /// `archiveAlerts` and `deleteAlerts` take `yyyy-MM-dd HH:mm:ss` in the server's zone
    /// (`ParamProcessWorker`), which for the simulator is UTC. One parser takes both: a `T` or
    /// a space between date and time, any fraction (ignored), an optional offset (none is UTC).
    pub fn parse(text: &str) -> Option<SimTime> {
        let (date, rest) = (text.get(..10)?, text.get(10..)?);
        let rest = rest.strip_prefix('T').or_else(|| rest.strip_prefix(' '))?;
        let (time, zone) = (rest.get(..8)?, rest.get(8..)?);

        let mut ymd = date.split('-');
        let year = digits(ymd.next()?, 4)?;
        let month = digits(ymd.next()?, 2)?;
        let day = digits(ymd.next()?, 2)?;
        let mut hms = time.split(':');
        let hour = digits(hms.next()?, 2)?;
        let minute = digits(hms.next()?, 2)?;
        let second = digits(hms.next()?, 2)?;
        if ymd.next().is_some() || hms.next().is_some() {
            return None;
        }
        // A leap second (60) is accepted as Java's lenient calendar fields accept it.
        if !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 60
        {
            return None;
        }

        let zone = match zone.strip_prefix('.') {
            Some(fraction) => fraction.trim_start_matches(|c: char| c.is_ascii_digit()),
            None => zone,
        };
        let offset = offset_secs(zone)?;
        let days = days_from_epoch(year, month, day);
        let secs = days * SECS_PER_DAY + hour * 3600 + minute * 60 + second - offset;
        Some(SimTime::from_unix(secs))
    }

    /// `yyyy-MM-dd'T'HH:mm:ssZ` in UTC, as `ApiResponseSerializer` writes every date.
    pub fn to_cloudstack(self) -> String {
        let days = self.unix_secs.div_euclid(SECS_PER_DAY);
        let secs = self.unix_secs.rem_euclid(SECS_PER_DAY);
        let (year, month, day) = date_of(days);
        format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}+0000",
            secs / 3600,
            secs % 3600 / 60,
            secs % 60
        )
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_cloudstack())
    }
}

/// Exactly `width` ASCII digits.
fn digits(part: &str, width: usize) -> Option<i64> {
    if part.len() == width && part.bytes().all(|b| b.is_ascii_digit()) {
        part.parse().ok()
    } else {
        None
    }
}

/// Seconds east of UTC: nothing or `Z` is UTC, else a sign and `hhmm` or `hh:mm`.
fn offset_secs(zone: &str) -> Option<i64> {
    if zone.is_empty() || zone == "Z" || zone == "z" {
        return Some(0);
    }
    let sign = match zone.as_bytes()[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let hhmm: String = match zone[1..].split_once(':') {
        Some((h, m)) if h.len() == 2 && m.len() == 2 => format!("{h}{m}"),
        Some(_) => return None,
        None => zone[1..].to_string(),
    };
    let hours = digits(hhmm.get(..2)?, 2)?;
    let minutes = digits(hhmm.get(2..)?, 2)?;
    Some(sign * (hours * 3600 + minutes * 60))
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_year(year: i64) -> i64 {
    if is_leap(year) { 366 } else { 365 }
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to the given date (negative before it).
fn days_from_epoch(year: i64, month: i64, day: i64) -> i64 {
    // Whole 400-year cycles first, then at most 399 single years and 11 months.
    let cycles = (year - 1970).div_euclid(400);
    let mut days = cycles * DAYS_PER_400_YEARS;
    for y in 1970 + cycles * 400..year {
        days += days_in_year(y);
    }
    for m in 1..month {
        days += days_in_month(year, m);
    }
    days + day - 1
}

/// The date `days` after 1970-01-01: the inverse of [`days_from_epoch`].
fn date_of(days: i64) -> (i64, i64, i64) {
    let mut year = 1970 + days.div_euclid(DAYS_PER_400_YEARS) * 400;
    let mut left = days.rem_euclid(DAYS_PER_400_YEARS);
    while left >= days_in_year(year) {
        left -= days_in_year(year);
        year += 1;
    }
    let mut month = 1;
    while left >= days_in_month(year, month) {
        left -= days_in_month(year, month);
        month += 1;
    }
    (year, month, left + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_forms_cloudstack_writes_and_accepts() {
        // 2024-06-05T07:51:22Z, counted by hand: 19_879 days after the epoch.
        let t = SimTime::from_unix(19_879 * 86_400 + 7 * 3600 + 51 * 60 + 22);
        assert_eq!(t.to_cloudstack(), "2024-06-05T07:51:22+0000");
        assert_eq!(t.to_string(), "2024-06-05T07:51:22+0000");
        for form in [
            "2024-06-05T07:51:22+0000",
            "2024-06-05T07:51:22Z",
            "2024-06-05T07:51:22z",
            "2024-06-05T09:51:22+02:00",
            "2024-06-05T09:51:22+0200",
            "2024-06-05T02:21:22-0530",
            "2024-06-05T07:51:22.123456Z",
            "2024-06-05T07:51:22.5+0000",
            "2024-06-05 07:51:22",
            "2024-06-05T07:51:22",
        ] {
            assert_eq!(SimTime::parse(form), Some(t), "{form}");
        }
        assert_eq!(
            SimTime::parse("1970-01-01T00:00:00Z"),
            Some(SimTime::from_unix(0))
        );
        assert_eq!(
            SimTime::parse("1969-12-31T23:59:59Z"),
            Some(SimTime::from_unix(-1))
        );
        assert_eq!(
            SimTime::parse("2000-02-29T00:00:00Z").map(SimTime::unix),
            Some(951_782_400)
        );
    }

    #[test]
    fn refuses_what_is_not_a_date() {
        for bad in [
            "",
            "2024-06-05",
            "2024-06-05X07:51:22Z",
            "2024-6-05T07:51:22Z",
            "2024-06-05T7:51:22Z",
            "x024-06-05T07:51:22Z",
            "2024-13-05T07:51:22Z",
            "2024-00-05T07:51:22Z",
            "2023-02-29T07:51:22Z",
            "2024-04-31T07:51:22Z",
            "2024-06-05T24:00:00Z",
            "2024-06-05T07:60:00Z",
            "2024-06-05T07:51:22+9",
            "2024-06-05T07:51:22+09:0",
            "2024-06-05T07:51:22 +0000",
            "2024-06-05T07:51:22+0000 ",
            "2024-06-05T07:51:22UTC",
            "2024-06-05T07:51:22+０１００",
        ] {
            assert_eq!(SimTime::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn writes_and_reads_back_across_centuries() {
        // Leap days of 1900 (none), 2000 (one) and 2100 (none) included.
        for secs in (-2_300_000_000i64..4_200_000_000).step_by(3_333_331) {
            let t = SimTime::from_unix(secs);
            assert_eq!(SimTime::parse(&t.to_cloudstack()), Some(t), "{secs}");
        }
        assert_eq!(
            SimTime::from_unix(4_107_542_400).to_cloudstack(),
            "2100-03-01T00:00:00+0000"
        );
        assert_eq!(
            SimTime::from_unix(-2_203_891_200).to_cloudstack(),
            "1900-03-01T00:00:00+0000"
        );
    }

    #[test]
    fn moves_by_whole_seconds() {
        let t = SimTime::from_unix(1_000);
        assert_eq!(t.plus(Duration::from_millis(61_900)).unix(), 1_061);
        assert_eq!(t.minus(Duration::from_secs(2_000)).unix(), -1_000);
        assert_eq!(
            SimTime::from_unix(i64::MAX).plus(Duration::MAX).unix(),
            i64::MAX
        );
        assert!(t < t.plus(Duration::from_secs(1)));
    }
}
