//! Byte comparisons a word at a time.
//!
//! In the wasm artifact, slice equality is a call to compiler-builtins'
//! `memcmp`, a loop over single bytes (wasm has no instruction for it);
//! natively it is libc's vector code. Ids, endpoints and enum values are
//! short, so a few 8-byte loads settle them in both.

/// The little-endian word of the 8 bytes of `s` from `at`.
#[inline]
fn word(s: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"))
}

#[inline]
fn half(s: &[u8], at: usize) -> u32 {
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
    }
}
