//! IP literals read without std's parser (kilobytes of the npm `.wasm`):
//! the webhook guard ([`super::push`]) and the `Host` checks
//! ([`super::policy`]) share this one.

/// `text` as an IP address: what `text.parse::<IpAddr>().ok()` gives (the
/// tests compare them), in a few lines instead of std's parser, which is
/// kilobytes of the npm `.wasm`. Its steps follow std's `core::net::parser`.
pub(crate) fn parse_ip(text: &str) -> Option<std::net::IpAddr> {
    let mut p = IpParser(text.as_bytes());
    let ip = match p.v4() {
        Some(v4) => std::net::IpAddr::V4(v4),
        None => std::net::IpAddr::V6(p.v6()?),
    };
    p.0.is_empty().then_some(ip)
}

/// The rest of the text being read; each reader leaves it as it was when it fails.
struct IpParser<'a>(&'a [u8]);

impl IpParser<'_> {
    fn atomically<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        let start = self.0;
        let got = read(self);
        if got.is_none() {
            self.0 = start;
        }
        got
    }

    fn given(&mut self, c: u8) -> Option<()> {
        let (&first, rest) = self.0.split_first()?;
        (first == c).then(|| self.0 = rest)
    }

    /// Up to `max` digits of `radix` (more is a failure), no leading zero
    /// unless `zero_prefix` (or the number is `0`), within `limit`.
    fn number(&mut self, radix: u32, max: usize, zero_prefix: bool, limit: u32) -> Option<u32> {
        self.atomically(|p| {
            let leading_zero = p.0.first() == Some(&b'0');
            let (mut n, mut count) = (0u32, 0);
            while let Some(d) = p.0.first().and_then(|&c| char::from(c).to_digit(radix)) {
                p.0 = p.0.get(1..).unwrap_or_default();
                n = n * radix + d;
                count += 1;
                if count > max || n > limit {
                    return None;
                }
            }
            (count > 0 && (zero_prefix || !leading_zero || count == 1)).then_some(n)
        })
    }

    fn v4(&mut self) -> Option<std::net::Ipv4Addr> {
        self.atomically(|p| {
            let mut octets = [0u8; 4];
            for (i, o) in octets.iter_mut().enumerate() {
                if i > 0 {
                    p.given(b'.')?;
                }
                *o = p.number(10, 3, false, 255)? as u8;
            }
            Some(octets.into())
        })
    }

    /// Groups separated by `:` into `groups`, the last two maybe an IPv4
    /// address: how many, and whether an IPv4 address ended them.
    fn groups(&mut self, groups: &mut [u16]) -> (usize, bool) {
        let limit = groups.len();
        for i in 0..limit {
            if i + 1 < limit {
                let v4 = self.atomically(|p| {
                    if i > 0 {
                        p.given(b':')?;
                    }
                    p.v4()
                });
                if let Some(v4) = v4 {
                    let [a, b, c, d] = v4.octets();
                    groups[i] = u16::from_be_bytes([a, b]);
                    groups[i + 1] = u16::from_be_bytes([c, d]);
                    return (i + 2, true);
                }
            }
            let group = self.atomically(|p| {
                if i > 0 {
                    p.given(b':')?;
                }
                p.number(16, 4, true, 0xffff)
            });
            match group {
                Some(g) => groups[i] = g as u16,
                None => return (i, false),
            }
        }
        (limit, false)
    }

    fn v6(&mut self) -> Option<std::net::Ipv6Addr> {
        self.atomically(|p| {
            let mut head = [0u16; 8];
            let (head_size, head_v4) = p.groups(&mut head);
            if head_size == 8 {
                return Some(head.into());
            }
            if head_v4 {
                return None;
            }
            p.given(b':')?;
            p.given(b':')?;
            // `::` stands for at least one group of zeros.
            let mut tail = [0u16; 7];
            let (tail_size, _) = p.groups(tail.get_mut(..7 - head_size)?);
            head.get_mut(8 - tail_size..)?
                .copy_from_slice(tail.get(..tail_size)?);
            Some(head.into())
        })
    }
}
