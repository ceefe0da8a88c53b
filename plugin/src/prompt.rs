//! Asking before destructive changes: on a terminal, a yes/no question (default no). Without
//! one (a script, a pipe), a command HNC's plugin had goes ahead as HNC's did, which never
//! asked, so scripts written for it keep working, with a note on stderr saying what was not
//! asked; a destructive command HNC's plugin did not have needs `--yes` there.

use std::io::IsTerminal;

use console::Term;

/// Why a change was not made.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The user said no.
    #[error("not confirmed: nothing was changed")]
    Declined,
    /// No terminal to ask on, and the command needs `--yes` there.
    #[error("not confirmed: there is no terminal to ask on, so nothing was changed. {question} To go ahead without asking, add --yes")]
    NoTerminal {
        /// What would have been asked.
        question: String,
    },
}

/// What a command does when there is no terminal to ask on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unasked {
    /// Go ahead, saying so: HNC's plugin had the command and never asked, and scripts written
    /// for it must keep working.
    GoAheadAsHnc,
    /// Refuse: HNC's plugin had no such command, so no script expects it to go ahead unasked.
    NeedsYes,
}

/// What to do about a question.
#[derive(Debug, PartialEq, Eq)]
enum Decision {
    /// `--yes`: go ahead silently.
    GoAhead,
    /// A terminal: ask.
    Ask,
    /// No terminal: go ahead as HNC did, saying so.
    GoAheadUnasked,
    /// No terminal: refuse.
    Refuse,
}

fn decide(yes: bool, terminal: bool, unasked: Unasked) -> Decision {
    match (yes, terminal, unasked) {
        (true, _, _) => Decision::GoAhead,
        (false, true, _) => Decision::Ask,
        (false, false, Unasked::GoAheadAsHnc) => Decision::GoAheadUnasked,
        (false, false, Unasked::NeedsYes) => Decision::Refuse,
    }
}

/// Goes ahead when `yes`, or when the user answers yes to `question` on the terminal. Without
/// a terminal to ask on, `unasked` decides.
pub fn confirm(question: &str, yes: bool, unasked: Unasked) -> Result<(), Refused> {
    match decide(yes, can_ask(), unasked) {
        Decision::GoAhead => Ok(()),
        Decision::GoAheadUnasked => {
            eprintln!("{}", unasked_note(question));
            Ok(())
        }
        Decision::Refuse => Err(Refused::NoTerminal { question: question.to_string() }),
        Decision::Ask if ask(question) => Ok(()),
        Decision::Ask => Err(Refused::Declined),
    }
}

fn unasked_note(question: &str) -> String {
    format!(
        "Not asked (no terminal): {question} Going ahead, as HNC's plugin, which never asked, did for this command (add --yes to silence this)"
    )
}

/// Whether there is a terminal to ask on: the question reads stdin and draws on stderr, so
/// both must be one.
pub fn can_ask() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Asks `question` on the terminal; no unless the user says yes (an unreadable answer is no).
pub fn ask(question: &str) -> bool {
    dialoguer::Confirm::new()
        .with_prompt(question)
        .default(false)
        .interact_on(&Term::stderr())
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asks_only_on_a_terminal_and_only_without_yes() {
        for unasked in [Unasked::GoAheadAsHnc, Unasked::NeedsYes] {
            assert_eq!(decide(true, true, unasked), Decision::GoAhead);
            assert_eq!(decide(true, false, unasked), Decision::GoAhead);
            assert_eq!(decide(false, true, unasked), Decision::Ask);
        }
        assert_eq!(decide(false, false, Unasked::GoAheadAsHnc), Decision::GoAheadUnasked);
        assert_eq!(decide(false, false, Unasked::NeedsYes), Decision::Refuse);
        assert_eq!(
            unasked_note("Set secrets to Remove?"),
            "Not asked (no terminal): Set secrets to Remove? Going ahead, as HNC's plugin, which never asked, did for this command (add --yes to silence this)"
        );
    }
}
