//! The one stray classifier every provider's rules use: what is wrong with a result that does
//! not answer a call of the place it sits in. Providers differ in where a result must sit and
//! in their wording, not in this: the call it belongs to is the latest one of its id before it.

use super::IssueKind;

/// What a stray result is, found from where its id is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stray {
    /// No call has its id.
    Orphan,
    /// Only later calls have its id; `call` is the first of them.
    BeforeCall { call: usize },
    /// The latest earlier call of its id had no result where it should: this one answers it,
    /// out of place.
    NotAdjacent { call: usize },
    /// The latest earlier call of its id already has its result.
    Duplicate { call: usize },
}

impl Stray {
    pub fn kind(self) -> IssueKind {
        match self {
            Stray::Orphan => IssueKind::OrphanResult,
            Stray::BeforeCall { .. } => IssueKind::ResultBeforeCall,
            Stray::NotAdjacent { .. } => IssueKind::ResultNotAdjacent,
            Stray::Duplicate { .. } => IssueKind::DuplicateId,
        }
    }
}

/// Classifies the stray result at position `at`. `calls` holds the positions of the calls of
/// its id, ascending (positions in the provider's own unit: messages, turns, items). `claim`
/// is asked about the latest earlier call only: whether it is still unanswered, taking it for
/// this result if so (a provider whose rules report the missing result anyway always says
/// yes, so every late result of a call is reported as late, never as a duplicate).
pub fn classify(at: usize, calls: &[usize], claim: impl FnOnce(usize) -> bool) -> Stray {
    let before = calls.partition_point(|&c| c < at);
    if before == 0 {
        return match calls.get(before) {
            Some(&call) => Stray::BeforeCall { call },
            None => Stray::Orphan,
        };
    }
    let call = calls[before - 1];
    if claim(call) {
        Stray::NotAdjacent { call }
    } else {
        Stray::Duplicate { call }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn each_kind() {
        assert_eq!(classify(3, &[], |_| true), Stray::Orphan);
        assert_eq!(
            classify(3, &[5, 8], |_| true),
            Stray::BeforeCall { call: 5 }
        );
        assert_eq!(
            classify(6, &[1, 5, 8], |_| true),
            Stray::NotAdjacent { call: 5 }
        );
        assert_eq!(
            classify(6, &[1, 5, 8], |_| false),
            Stray::Duplicate { call: 5 }
        );
        assert_eq!(
            Stray::Duplicate { call: 0 }.kind(),
            IssueKind::DuplicateId,
            "kinds map onto the issue kinds"
        );
    }

    proptest! {
        /// The obvious reading: the latest call before `at`, else the first after, else none;
        /// `claim` is asked exactly when there is an earlier call, about that call.
        #[test]
        fn agrees_with_a_linear_scan(
            mut calls in prop::collection::vec(0usize..20, 0..6), at in 0usize..20, open: bool
        ) {
            calls.sort_unstable();
            calls.dedup();
            calls.retain(|&c| c != at);
            let earlier = calls.iter().rev().find(|&&c| c < at).copied();
            let later = calls.iter().find(|&&c| c > at).copied();
            let mut asked = None;
            let got = classify(at, &calls, |c| {
                asked = Some(c);
                open
            });
            prop_assert_eq!(asked, earlier);
            let expected = match (earlier, later) {
                (Some(call), _) if open => Stray::NotAdjacent { call },
                (Some(call), _) => Stray::Duplicate { call },
                (None, Some(call)) => Stray::BeforeCall { call },
                (None, None) => Stray::Orphan,
            };
            prop_assert_eq!(got, expected);
        }
    }
}
