//! Colour: the styles text output uses, and the one rule for when it is coloured (on a
//! terminal, unless `NO_COLOR` is set: https://no-color.org).

use std::ffi::OsString;
use std::io::IsTerminal;

use console::Style;
pub use namespace_diagnose::report::Style as Styles;

/// Colours, or none.
#[derive(Debug, Clone)]
pub struct Paint {
    bad: Style,
    good: Style,
    warn: Style,
    dim: Style,
    head: Style,
}

impl Paint {
    /// Colours when `color` is true, plain text otherwise.
    pub fn new(color: bool) -> Paint {
        // Forced either way, so console's own terminal detection never overrides the rule.
        let s = || Style::new().force_styling(color);
        Paint {
            bad: s().red().bold(),
            good: s().green(),
            warn: s().yellow(),
            dim: s().dim(),
            head: s().bold(),
        }
    }

    /// Colours for text written to `stream` (stdout or stderr): every coloured output goes
    /// through here, so the rule is the same everywhere.
    pub fn for_stream(stream: &impl IsTerminal) -> Paint {
        Paint::new(color(stream.is_terminal(), std::env::var_os("NO_COLOR")))
    }
}

/// The styles, written once: the diagnoser's [`namespace_diagnose::report::Style`], which every
/// coloured output of the plugin uses (its callers import it as [`Styles`]).
impl Styles for Paint {
    fn bad(&self, s: &str) -> String {
        self.bad.apply_to(s).to_string()
    }
    fn good(&self, s: &str) -> String {
        self.good.apply_to(s).to_string()
    }
    fn warn(&self, s: &str) -> String {
        self.warn.apply_to(s).to_string()
    }
    fn dim(&self, s: &str) -> String {
        self.dim.apply_to(s).to_string()
    }
    fn head(&self, s: &str) -> String {
        self.head.apply_to(s).to_string()
    }
}

/// The rule: a terminal, and `NO_COLOR` unset or empty (an empty one does not count, as the
/// convention says).
fn color(terminal: bool, no_color: Option<OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_needs_a_terminal_and_no_no_color() {
        assert!(color(true, None));
        assert!(!color(false, None));
        assert!(!color(true, Some("1".into())));
        assert!(color(true, Some("".into())), "an empty NO_COLOR does not count");
    }

    #[test]
    fn no_colour_is_plain_text() {
        let p = Paint::new(false);
        assert_eq!(p.bad("x") + &p.good("y") + &p.warn("z") + &p.dim("d") + &p.head("h"), "xyzdh");
        assert!(Paint::new(true).bad("x").contains('\u{1b}'));
    }
}
