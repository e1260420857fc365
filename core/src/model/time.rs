//! Wall-clock instants as A2A writes them: RFC 3339 / ISO 8601 UTC strings
//! (`2026-12-01T22:50:00.123Z`), kept as Unix milliseconds. Core reads no
//! clock; hosts hand it the time. Also how a `Duration` becomes the
//! milliseconds the machines count in.

use std::time::Duration;

/// Whole milliseconds, saturating (a `Duration` may exceed `u64` ms).
/// Without `as_millis`: its `u128` arithmetic costs the wasm build.
pub fn millis(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1000)
        .saturating_add(u64::from(d.subsec_millis()))
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number from [`days_from_civil`].
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The length of [`format_rfc3339`]'s text (for years 0–9999).
pub const RFC3339_LEN: usize = 24;

/// `unix_ms` as `YYYY-MM-DDTHH:MM:SS.mmmZ`, written into `buf` (no allocation:
/// GetTask serialises one per answer).
pub fn write_rfc3339(unix_ms: u64, buf: &mut [u8; RFC3339_LEN]) -> &str {
    let secs = (unix_ms / 1000) as i64;
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    let fields = [
        (0, 4, y.clamp(0, 9999)),
        (5, 2, mo),
        (8, 2, d),
        (11, 2, rem / 3600),
        (14, 2, rem / 60 % 60),
        (17, 2, rem % 60),
        (20, 3, (unix_ms % 1000) as i64),
    ];
    *buf = *b"0000-00-00T00:00:00.000Z";
    for (at, width, mut n) in fields {
        for i in (at..at + width).rev() {
            buf[i] = b'0' + (n % 10) as u8;
            n /= 10;
        }
    }
    // Only ASCII digits and separators were written.
    std::str::from_utf8(buf).unwrap_or("1970-01-01T00:00:00.000Z")
}

/// `unix_ms` as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn format_rfc3339(unix_ms: u64) -> String {
    write_rfc3339(unix_ms, &mut [0; RFC3339_LEN]).to_string()
}

/// Reads `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (RFC 3339; `t`, `z` and
/// a space separator accepted) as Unix milliseconds. `None` if it is not one,
/// or is before 1970.
pub fn parse_rfc3339(text: &str) -> Option<u64> {
    let b = text.trim().as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = b.get(r)?;
        if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
            return None;
        }
        // At most four digits: no overflow, and no `str::parse` in the `.wasm`.
        Some(s.iter().fold(0, |n, c| n * 10 + i64::from(c - b'0')))
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let mut i = 19;
    let mut ms = 0;
    if b[i] == b'.' {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        // Milliseconds: the first three digits, padded.
        let digits = &b[start..i];
        ms = (0..3).fold(0, |n, k| {
            n * 10 + digits.get(k).map_or(0, |c| i64::from(c - b'0'))
        });
    }
    let offset_min = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let two = |a: u8, b: u8| -> Option<i64> {
                (a.is_ascii_digit() && b.is_ascii_digit())
                    .then(|| i64::from((a - b'0') * 10 + (b - b'0')))
            };
            let minutes = two(*h1, *h2)? * 60 + two(*m1, *m2)?;
            if *sign == b'+' {
                minutes
            } else {
                -minutes
            }
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    let total = ((days * 24 + h) * 60 + mi - offset_min) * 60 + s;
    u64::try_from(total * 1000 + ms).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    #[test]
    fn formats_and_reads_back_utc_milliseconds() {
        for ms in [0, 1_764_629_400_123, 951_782_400_000, 4_102_444_799_999] {
            let text = format_rfc3339(ms);
            assert_eq!(parse_rfc3339(&text), Some(ms), "{text}");
        }
        assert_eq!(
            format_rfc3339(1_764_629_400_123),
            "2025-12-01T22:50:00.123Z"
        );
        assert_eq!(format_rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn reads_offsets_fractions_and_refuses_what_is_not_a_timestamp() {
        let at = parse_rfc3339("2025-12-01T22:50:00Z").unwrap();
        assert_eq!(parse_rfc3339("2025-12-01T23:50:00+01:00"), Some(at));
        assert_eq!(parse_rfc3339("2025-12-01t22:50:00.5z"), Some(at + 500));
        assert_eq!(
            parse_rfc3339("2025-12-01T22:50:00.123456789Z"),
            Some(at + 123)
        );
        for bad in [
            "",
            "yesterday",
            "2025-13-01T00:00:00Z",
            "2025-12-01T24:00:00Z",
            "2025-12-01T22:50:00",
            "2025-12-01T22:50:00.Z",
            "1969-12-31T23:59:59Z",
            "2025-12-01T22:50:00+0100",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
        }
    }
}
