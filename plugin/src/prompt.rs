//! Asking before destructive changes: on a terminal, a yes/no question (default no). Without
//! one (a script, a pipe) the commands go ahead as HNC's plugin did, which never asked: scripts
//! written for it keep working; a note on stderr says what was not asked.

use std::io::IsTerminal;

use console::Term;

/// Why a change was not made.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The user said no.
    #[error("not confirmed: nothing was changed")]
    Declined,
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
}

fn decide(yes: bool, terminal: bool) -> Decision {
    match (yes, terminal) {
        (true, _) => Decision::GoAhead,
        (false, true) => Decision::Ask,
        (false, false) => Decision::GoAheadUnasked,
    }
}

/// Goes ahead when `yes`, when there is no terminal to ask on (as HNC's plugin did; with a
/// note on stderr), or when the user answers yes to `question` on the terminal.
pub fn confirm(question: &str, yes: bool) -> Result<(), Refused> {
    match decide(yes, can_ask()) {
        Decision::GoAhead => Ok(()),
        Decision::GoAheadUnasked => {
            eprintln!("{}", unasked_note(question));
            Ok(())
        }
        Decision::Ask if ask(question) => Ok(()),
        Decision::Ask => Err(Refused::Declined),
    }
}

fn unasked_note(question: &str) -> String {
    format!(
        "Not asked (no terminal), going ahead as HNC's plugin did: {question} (add --yes to silence this)"
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
        assert_eq!(decide(true, true), Decision::GoAhead);
        assert_eq!(decide(true, false), Decision::GoAhead);
        assert_eq!(decide(false, true), Decision::Ask);
        assert_eq!(decide(false, false), Decision::GoAheadUnasked);
        assert_eq!(
            unasked_note("Delete \"a\"?"),
            "Not asked (no terminal), going ahead as HNC's plugin did: Delete \"a\"? (add --yes to silence this)"
        );
    }
}
