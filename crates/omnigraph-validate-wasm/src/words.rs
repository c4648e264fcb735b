//! Byte comparisons and digit runs a word at a time.
//!
//! In the wasm artifact, slice equality is a call to compiler-builtins'
//! `memcmp`, a loop over single bytes (wasm has no instruction for it);
//! natively it is libc's vector code. Ids, endpoints and enum values are short,
//! so a few 8-byte loads settle them in both. More in lib.rs.

/// The little-endian word of the 8 bytes of `s` from `at`.
#[inline]
pub(crate) fn word(s: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"))
}

/// The little-endian half word of the 4 bytes of `s` from `at`.
#[inline]
pub(crate) fn half(s: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(s[at..at + 4].try_into().expect("4 bytes"))
}

/// `a == b`, read as whole words: the last word (or half) overlaps the one
/// before it instead of a loop over the bytes left.
#[inline]
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        8.. => {
            let mut at = 0;
            while at + 8 < n {
                if word(a, at) != word(b, at) {
                    return false;
                }
                at += 8;
            }
            word(a, n - 8) == word(b, n - 8)
        }
        4..8 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        _ => a.iter().zip(b).all(|(x, y)| x == y),
    }
}

/// True when `text` starts with `prefix`, compared as [`same_bytes`].
#[inline]
pub fn starts_with(text: &[u8], prefix: &[u8]) -> bool {
    text.get(..prefix.len()).is_some_and(|head| same_bytes(head, prefix))
}

/// `10^n` for the digits one word holds.
const POW10: [u64; 9] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000];

/// Each byte of `w` minus `b'0'` (its value where it is a digit, 0..=9),
/// and bits set in the bytes that are not digits: a byte is one when its
/// high nibble is clear and adding 6 does not carry into it (a non-digit's
/// carry only reaches later bytes, whose bits may then be set too).
#[inline]
pub(crate) fn digit_bytes(w: u64) -> (u64, u64) {
    let x = w ^ 0x3030_3030_3030_3030;
    (x, (x.wrapping_add(0x0606_0606_0606_0606) | x) & 0xF0F0_F0F0_F0F0_F0F0)
}

/// The run of ASCII digits in `b` from `p`: where it ends, and `mantissa`
/// with the run's digits appended (`mantissa * 10 + digit` for each,
/// wrapping, as a loop over the digits would give). Up to 8 digits per
/// word (simdjson's method): in wasmtime's code every loop turn costs an
/// epoch check and the spills around it (docs/lab/2026-12-04-epoch-checks.md), and most
/// numbers are one word.
#[inline]
pub fn digit_run(b: &[u8], mut p: usize, mut mantissa: u64) -> (usize, u64) {
    while p + 8 <= b.len() {
        let (x, stop) = digit_bytes(word(b, p));
        let n = (stop.trailing_zeros() / 8) as usize;
        if n == 0 {
            return (p, mantissa);
        }
        // The n digits moved to the word's top, zero digits before them
        // (the first digit is the lowest byte), then summed in pairs,
        // fours and eights.
        let d = x << (8 * (8 - n));
        let d = (d.wrapping_mul(10) + (d >> 8)) & 0x00FF_00FF_00FF_00FF;
        let d = (d.wrapping_mul(100) + (d >> 16)) & 0x0000_FFFF_0000_FFFF;
        let d = (d.wrapping_mul(10_000) + (d >> 32)) & 0xFFFF_FFFF;
        mantissa = mantissa.wrapping_mul(POW10[n]).wrapping_add(d);
        p += n;
        if n < 8 {
            return (p, mantissa);
        }
    }
    // Fewer than 8 bytes left in `b`.
    while let Some(&c @ b'0'..=b'9') = b.get(p) {
        mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(c - b'0'));
        p += 1;
    }
    (p, mantissa)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Word comparison says what `==` says, for lengths on both sides of
        /// 4, 8 and 16 and pairs that differ in one byte anywhere.
        #[test]
        fn same_bytes_is_equality(
            a in proptest::collection::vec(proptest::sample::select(b"ab\x00\xff".to_vec()), 0..40),
            flip in proptest::option::of(0usize..40),
            cut in proptest::option::of(0usize..40),
        ) {
            let mut b = a.clone();
            if let Some(at) = flip.filter(|&at| at < b.len()) {
                b[at] ^= 1;
            }
            if let Some(n) = cut.filter(|&n| n < b.len()) {
                b.truncate(n);
            }
            proptest::prop_assert_eq!(same_bytes(&a, &b), a == b);
            proptest::prop_assert_eq!(starts_with(&a, &b), a.starts_with(&b));
        }

        /// A digit run read in words ends where the byte loop ends, with
        /// the byte loop's wrapping mantissa, for runs on both sides of 8
        /// and 16, the bytes next to the digits' codes around them, and
        /// runs that reach the end of the input.
        #[test]
        fn digit_run_is_the_byte_loop(
            b in proptest::collection::vec(
                proptest::prop_oneof![
                    4 => proptest::sample::select(b"0123456789".to_vec()),
                    1 => proptest::sample::select(b"/:.eE-+ \x00\x7f\x80\xb0\xb9\xff\x06\xf9\xfa".to_vec()),
                ],
                0..40,
            ),
            p in 0usize..40,
            mantissa in proptest::num::u64::ANY,
        ) {
            let p = p.min(b.len());
            let (mut end, mut expected) = (p, mantissa);
            while let Some(&c @ b'0'..=b'9') = b.get(end) {
                expected = expected.wrapping_mul(10).wrapping_add(u64::from(c - b'0'));
                end += 1;
            }
            proptest::prop_assert_eq!(digit_run(&b, p, mantissa), (end, expected));
        }
    }
}
