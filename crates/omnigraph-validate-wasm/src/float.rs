//! Floats rendered as text the way ECMAScript's `Number.prototype.toString`
//! does (shortest round-trip digits): a float key's canonical form (SPEC
//! §2.4) and a float range bound in a schema's catalog. Below both `value`
//! and `schema`, which use it.

/// ECMAScript `Number.prototype.toString` layout of shortest round-trip
/// digits: `-0` as `0`, plain notation for exponents in (-7, 21).
fn format_shortest(sci: String) -> String {
    // `sci` is Rust's shortest `{:e}` form, e.g. "-1.25e-7".
    let (neg, body) = match sci.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, sci.as_str()),
    };
    let (mantissa, exp) = body.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("exponent is an integer");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if digits == "0" {
        return "0".into();
    }
    let k = digits.len() as i32;
    let n = exp + 1;
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    if k <= n && n <= 21 {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-n) as usize));
        out.push_str(&digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if n - 1 < 0 { '-' } else { '+' });
        out.push_str(&(n - 1).abs().to_string());
    }
    out
}

pub fn format_f64(v: f64) -> String {
    format_shortest(format!("{v:e}"))
}

pub fn format_f32(v: f32) -> String {
    format_shortest(format!("{v:e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_render_like_ecmascript() {
        for (v, s) in [
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (-1.5, "-1.5"),
            (0.1, "0.1"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (1.5e-7, "1.5e-7"),
            (1e-6, "0.000001"),
            (123.456, "123.456"),
        ] {
            assert_eq!(format_f64(v), s, "{v}");
        }
        assert_eq!(format_f32(0.1f32), "0.1");
    }
}
