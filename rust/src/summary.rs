//! Summary notes: the one machine-generated message that stands for dropped units. The text
//! comes from the caller's summarizer; the core only reserves room for it, recognizes an
//! earlier note by its first line, and places the new one right after the protected prefix.

use crate::view::Message;

/// First line of every summary note.
pub const MARKER: &str = "[ringbound:summary]";

/// Whether `msg` is a summary note an earlier assembly inserted.
pub fn is_note(msg: &Message) -> bool {
    msg.role.is_instruction() && msg.texts.len() == 1 && msg.texts[0].starts_with(MARKER)
}
