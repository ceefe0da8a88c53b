//! Kubernetes quantities (`"1500m"`, `"2Gi"`, `"1e3"`) as exact numbers, for summing the usage
//! of a subtree and comparing it with a hierarchical quota. Amounts are whole nano-units
//! (10⁻⁹), the finest precision Kubernetes keeps; finer values round up, as Kubernetes does.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Nano-units in one unit.
const NANO: i128 = 1_000_000_000;

/// Why a quantity could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not Kubernetes' quantity syntax.
    #[error("{0:?} is not a quantity: write a number with an optional suffix, such as \"10\", \"500m\", \"1.5\", \"2Gi\" or \"1e3\"")]
    Syntax(String),
    /// Too large to hold.
    #[error("{0:?} is too large")]
    TooLarge(String),
}

/// An exact amount, in nano-units, and whether it was written with a binary suffix (`Ki`…),
/// which is how it is written back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Amount {
    nanos: i128,
    binary: bool,
}

impl Amount {
    /// Zero.
    pub const ZERO: Amount = Amount { nanos: 0, binary: false };

    /// Reads a quantity.
    pub fn parse(text: &str) -> Result<Amount, QuantityError> {
        parse(text.trim()).ok_or_else(|| QuantityError::Syntax(text.to_string()))?
    }

    /// `self + other`, written as `self` is.
    pub fn plus(self, other: Amount) -> Amount {
        Amount { nanos: self.nanos.saturating_add(other.nanos), binary: self.binary || other.binary }
    }

    /// `self - other`, written as `self` is.
    pub fn minus(self, other: Amount) -> Amount {
        Amount { nanos: self.nanos.saturating_sub(other.nanos), ..self }
    }

    /// An equal part of it, of `parts` parts, rounded down to a whole unit, or to a thousandth
    /// of one if `fine` (nothing if it is negative).
    pub fn share(self, parts: u64, fine: bool) -> Amount {
        let step = if fine { NANO / 1000 } else { NANO };
        let part = self.nanos.max(0) / i128::from(parts.max(1));
        Amount { nanos: part - part % step, ..self }
    }

    /// Whether it is above `limit`.
    pub fn exceeds(self, limit: Amount) -> bool {
        self.nanos > limit.nanos
    }

    /// The amount with `like`'s way of writing it.
    pub fn written_as(self, like: Amount) -> Amount {
        Amount { binary: like.binary, ..self }
    }

    /// As a Kubernetes Quantity.
    pub fn to_quantity(self) -> Quantity {
        Quantity(self.to_string())
    }
}

impl fmt::Display for Amount {
    /// The shortest exact form: the largest suffix that keeps the number whole.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let n = self.nanos.unsigned_abs();
        if n == 0 {
            return f.write_str("0");
        }
        let unit = NANO as u128;
        if self.binary && n.is_multiple_of(unit) {
            let v = n / unit;
            for (suffix, power) in [("Ei", 6), ("Pi", 5), ("Ti", 4), ("Gi", 3), ("Mi", 2), ("Ki", 1)] {
                let m = 1u128 << (10 * power);
                if v.is_multiple_of(m) {
                    return write!(f, "{sign}{}{suffix}", v / m);
                }
            }
        }
        for (suffix, scale) in
            [("E", 27), ("P", 24), ("T", 21), ("G", 18), ("M", 15), ("k", 12), ("", 9), ("m", 6), ("u", 3)]
        {
            let m = 10u128.pow(scale);
            if n.is_multiple_of(m) {
                return write!(f, "{sign}{}{suffix}", n / m);
            }
        }
        write!(f, "{sign}{n}n")
    }
}

/// `None` for bad syntax, `Some(Err)` for a number too large.
fn parse(text: &str) -> Option<Result<Amount, QuantityError>> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let number_end = rest.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return None;
    }
    let (binary, shift) = suffix_scale(suffix)?;
    let too_large = || QuantityError::TooLarge(text.to_string());
    // mantissa = whole.fraction as an integer, scaled down by 10^fraction.len().
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 36 {
        return Some(Err(too_large()));
    }
    let mantissa: i128 = if digits.is_empty() { 0 } else { digits.parse().ok()? };
    let value = match shift {
        Scale::Binary(power) => scale(mantissa, 9, fraction.len(), 1i128 << (10 * power)),
        Scale::Decimal(exp) => scale(mantissa, 9 + exp, fraction.len(), 1),
    };
    Some(
        value
            .map(|nanos| Amount { nanos: if negative { -nanos } else { nanos }, binary })
            .ok_or_else(too_large),
    )
}

/// How a suffix scales a number.
enum Scale {
    /// Times 1024^n.
    Binary(u32),
    /// Times 10^n.
    Decimal(i32),
}

fn suffix_scale(suffix: &str) -> Option<(bool, Scale)> {
    let binary = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if let Some(i) = binary.iter().position(|s| *s == suffix) {
        return Some((true, Scale::Binary(i as u32 + 1)));
    }
    let decimal = match suffix {
        "n" => -9,
        "u" => -6,
        "m" => -3,
        "" => 0,
        "k" => 3,
        "M" => 6,
        "G" => 9,
        "T" => 12,
        "P" => 15,
        "E" => 18,
        _ => {
            let exp = suffix.strip_prefix('e').or_else(|| suffix.strip_prefix('E'))?;
            let exp: i32 = exp.parse().ok().filter(|e: &i32| e.abs() <= 40)?;
            return Some((false, Scale::Decimal(exp)));
        }
    };
    Some((false, Scale::Decimal(decimal)))
}

/// `mantissa × 10^(exp10 − decimals) × factor`, rounded up to a whole number, or `None` if too
/// large.
fn scale(mantissa: i128, exp10: i32, decimals: usize, factor: i128) -> Option<i128> {
    let value = mantissa.checked_mul(factor)?;
    let exp = exp10 - decimals as i32;
    if exp >= 0 {
        return value.checked_mul(10i128.checked_pow(exp as u32)?);
    }
    let divisor = 10i128.checked_pow(exp.unsigned_abs())?;
    Some(value / divisor + i128::from(value % divisor != 0))
}

/// A ResourceList read exactly: resource name to amount.
pub type Amounts = BTreeMap<String, Amount>;

/// Reads every quantity of `list`, naming the first bad one.
pub fn parse_list(list: &BTreeMap<String, Quantity>) -> Result<Amounts, (String, QuantityError)> {
    list.iter()
        .map(|(name, q)| Amount::parse(&q.0).map(|a| (name.clone(), a)).map_err(|e| (name.clone(), e)))
        .collect()
}

/// `a + b`, per resource.
pub fn add(a: &Amounts, b: &Amounts) -> Amounts {
    let mut sum = a.clone();
    for (name, amount) in b {
        let entry = sum.entry(name.clone()).or_insert(Amount::ZERO.written_as(*amount));
        *entry = entry.plus(*amount);
    }
    sum
}

/// The per-resource maximum of `a` and `b`.
pub fn max(a: &Amounts, b: &Amounts) -> Amounts {
    let mut out = a.clone();
    for (name, amount) in b {
        let entry = out.entry(name.clone()).or_insert(*amount);
        if amount.exceeds(*entry) {
            *entry = *amount;
        }
    }
    out
}

/// Whether `new` holds more of any resource than `old`.
pub fn grew(old: &Amounts, new: &Amounts) -> bool {
    new.iter().any(|(r, a)| a.exceeds(old.get(r).copied().unwrap_or(Amount::ZERO)))
}

/// Whether two lists hold the same amounts, however each is written.
pub fn same(a: &Amounts, b: &Amounts) -> bool {
    a.len() == b.len() && a.iter().all(|(r, x)| b.get(r).is_some_and(|y| !x.exceeds(*y) && !y.exceeds(*x)))
}

/// The resources of `limits` that `used` exceeds.
pub fn exceeded<'a>(used: &Amounts, limits: &'a Amounts) -> Vec<&'a str> {
    limits
        .iter()
        .filter(|(name, limit)| used.get(*name).is_some_and(|u| u.exceeds(**limit)))
        .map(|(name, _)| name.as_str())
        .collect()
}

/// As a ResourceList, each amount written as `like` writes that resource (if it does).
pub fn to_list(amounts: &Amounts, like: &Amounts) -> BTreeMap<String, Quantity> {
    amounts
        .iter()
        .map(|(name, a)| {
            let a = like.get(name).map_or(*a, |l| a.written_as(*l));
            (name.clone(), a.to_quantity())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amount(text: &str) -> Amount {
        Amount::parse(text).unwrap()
    }

    #[test]
    fn lists_are_compared_by_amount_not_by_writing() {
        let list = |q: &str| parse_list(&[("memory".to_string(), Quantity(q.into()))].into()).unwrap();
        assert!(same(&list("1Gi"), &list("1073741824")));
        assert!(!same(&list("1Gi"), &list("1G")));
        assert!(!same(&list("1Gi"), &Amounts::new()));
    }

    #[test]
    fn reads_every_form_kubernetes_writes() {
        for (text, nanos) in [
            ("1", NANO),
            ("1500m", 1_500_000_000),
            ("1.5", 1_500_000_000),
            (".5", 500_000_000),
            ("2.", 2 * NANO),
            ("1Ki", 1024 * NANO),
            ("2Gi", 2 * (1 << 30) * NANO),
            ("1e3", 1000 * NANO),
            ("1E-3", 1_000_000),
            ("10n", 10),
            ("5u", 5000),
            ("3k", 3000 * NANO),
            ("+4", 4 * NANO),
            ("-4", -4 * NANO),
            ("0.1n", 1),
        ] {
            assert_eq!(amount(text).nanos, nanos, "{text}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_quantity() {
        for text in ["", "m", "1.2.3", "1Kb", "abc", "1 Gi", "--1", "1e", "1e99"] {
            assert!(Amount::parse(text).is_err(), "{text}");
        }
        assert!(matches!(Amount::parse("9".repeat(40).as_str()), Err(QuantityError::TooLarge(_))));
        let message = Amount::parse("1Kb").unwrap_err().to_string();
        assert!(message.contains("\"1Kb\" is not a quantity: write"), "{message}");
    }

    #[test]
    fn writes_the_shortest_exact_form() {
        for (text, written) in [
            ("1500m", "1500m"),
            ("1.5", "1500m"),
            ("2000", "2k"),
            ("1536Mi", "1536Mi"),
            ("1024Ki", "1Mi"),
            ("0", "0"),
            ("1e3", "1k"),
        ] {
            assert_eq!(amount(text).to_string(), written, "{text}");
        }
        assert_eq!(amount("1Gi").plus(amount("512Mi")).to_string(), "1536Mi");
        assert_eq!(amount("500m").plus(amount("1")).to_string(), "1500m");
    }

    #[test]
    fn sums_and_limits_per_resource() {
        let list = |pairs: &[(&str, &str)]| -> Amounts {
            pairs.iter().map(|(n, q)| (n.to_string(), amount(q))).collect()
        };
        let used = add(&list(&[("pods", "3"), ("requests.cpu", "1")]), &list(&[("pods", "2")]));
        assert_eq!(used["pods"], amount("5"));
        let hard = list(&[("pods", "4"), ("requests.cpu", "2"), ("services", "1")]);
        assert_eq!(exceeded(&used, &hard), ["pods"]);
        assert_eq!(
            max(&list(&[("pods", "3")]), &list(&[("pods", "5"), ("services", "1")])),
            list(&[("pods", "5"), ("services", "1")])
        );
        let written = to_list(&list(&[("memory", "1073741824")]), &list(&[("memory", "2Gi")]));
        assert_eq!(written["memory"].0, "1Gi");
    }
}
