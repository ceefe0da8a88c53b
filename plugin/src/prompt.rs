//! Asking before destructive changes: on a terminal, a yes/no question (default no); without
//! one, a refusal unless `--yes` was given, so a script never blocks or deletes by accident.

use std::io::IsTerminal;

use console::Term;

/// Why a change was not made.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// There is nobody to ask.
    #[error("confirmation needed ({question}) but there is no terminal to ask on: add --yes to go ahead without asking. Nothing was changed.")]
    NoTerminal {
        /// The question that would have been asked.
        question: String,
    },
    /// The user said no.
    #[error("not confirmed: nothing was changed")]
    Declined,
}

/// Goes ahead when `yes`, or when the user answers yes to `question` on the terminal.
pub fn confirm(question: &str, yes: bool) -> Result<(), Refused> {
    if yes {
        return Ok(());
    }
    if !can_ask() {
        return Err(Refused::NoTerminal { question: question.to_string() });
    }
    if ask(question) {
        Ok(())
    } else {
        Err(Refused::Declined)
    }
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
