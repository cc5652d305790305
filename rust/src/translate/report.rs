//! What a translation changed: every part dropped, made text or rewritten, every turn added,
//! and the map of rewritten call ids. Nothing leaves the source without an entry here.

/// One change a translation made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The source item it concerns; None for the request as a whole (a tool, a field).
    pub item: Option<usize>,
    /// What happened, in a word: `dropped`, `as_text`, `placeholder`, `rewritten`, `inserted`,
    /// `mapped`, `summarized`.
    pub action: &'static str,
    /// What it happened to: `signature`, `redacted_thinking`, `image`, `field:stop`, ...
    pub what: String,
    /// Why, in a sentence.
    pub detail: String,
}

impl Change {
    /// Whether the change drops something of the source (nothing of it reaches the target).
    pub fn is_drop(&self) -> bool {
        self.action == "dropped"
    }
}

/// The changes of a translation, in source order, and its id map.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub changes: Vec<Change>,
    /// `(source id, target id)` for every call whose id was rewritten, in call order.
    pub ids: Vec<(String, String)>,
}

impl Report {
    pub fn add(
        &mut self,
        item: Option<usize>,
        action: &'static str,
        what: impl Into<String>,
        detail: impl Into<String>,
    ) {
        self.changes.push(Change {
            item,
            action,
            what: what.into(),
            detail: detail.into(),
        });
    }
}
