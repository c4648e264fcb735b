//! "Did you mean" suggestions for unknown names. More in lib.rs.

/// The candidate closest to `name` by edit distance, if close enough: a
/// case-insensitive match, or at most a third of the name's length (1 to 3 edits).
/// Ties go to the alphabetically first candidate, so the answer never
/// depends on iteration order.
pub fn closest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).clamp(1, 3);
    let lower = name.to_lowercase();
    candidates
        .filter_map(|c| {
            let d = if c.to_lowercase() == lower { 0 } else { distance(name, c) };
            (d <= limit && c != name).then_some((d, c))
        })
        .min()
        .map(|(_, c)| c)
}

/// ` (did you mean 'x'?)` when a candidate is close to `name`, else "".
pub fn hint<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> String {
    match closest(name, candidates) {
        Some(best) => format!(" (did you mean '{best}'?)"),
        None => String::new(),
    }
}

/// Edit distance with adjacent transpositions (optimal string alignment),
/// so `nmae` is one edit from `name`. Names are short, so O(n·m) is fine;
/// inputs are cut at 64 characters (nothing longer is close to a schema name).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().take(64).collect();
    let b: Vec<char> = b.chars().take(64).collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        d[i * width] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1).min(d[i * width + j - 1] + 1).min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn suggests_close_names_only() {
        let names = ["name", "email", "age"];
        assert_eq!(closest("nmae", names.into_iter()), Some("name"));
        assert_eq!(closest("Email", names.into_iter()), Some("email"));
        assert_eq!(closest("zzzzzz", names.into_iter()), None);
    }

    #[test]
    fn ties_break_alphabetically() {
        assert_eq!(closest("ab", ["ac", "aa"].into_iter()), Some("aa"));
        assert_eq!(closest("ab", ["aa", "ac"].into_iter()), Some("aa"));
    }
}
