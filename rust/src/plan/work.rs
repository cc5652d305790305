//! The request as the stages see it: the caller's messages with synthesized results inserted
//! where a call has none, and where each working message comes from.

use std::borrow::Cow;

use super::Span;
use crate::pairing;
use crate::request::Request;
use crate::units::Unit;
use crate::view::Message;

/// Where a message of the working view comes from.
#[derive(Clone, Copy)]
pub(super) enum Source {
    Original(usize),
    Synthesized,
}

/// The request with repairs applied: what the stages see. Tokens of original messages are
/// counted only when asked for; synthesized results are counted up front (they are few).
pub(super) struct Work<'r, 'a> {
    pub req: &'r Request<'a>,
    pub msgs: Vec<&'r Message>,
    pub source: Vec<Source>,
    pub synthesized_tokens: Vec<u64>,
}

impl Work<'_, '_> {
    pub fn tokens(&self, w: usize) -> u64 {
        match self.source[w] {
            Source::Original(i) => u64::from(self.req.tokens(i)),
            Source::Synthesized => self.synthesized_tokens[w],
        }
    }

    /// `Some(tokens(w))` when it is at most `limit`, found without counting much past it.
    pub fn tokens_within(&self, w: usize, limit: u64) -> Option<u64> {
        match self.source[w] {
            Source::Original(i) => self.req.tokens_within(i, limit).map(u64::from),
            Source::Synthesized => Some(self.synthesized_tokens[w]).filter(|&t| t <= limit),
        }
    }

    /// Message `w` with every text.
    pub fn full(&self, w: usize) -> Cow<'_, Message> {
        match self.source[w] {
            Source::Original(i) => self.req.full(i),
            Source::Synthesized => Cow::Borrowed(self.msgs[w]),
        }
    }

    /// An upper bound of `tokens(w)` that tokenizes nothing.
    pub fn bound(&self, w: usize) -> u64 {
        match self.source[w] {
            Source::Original(i) => u64::from(self.req.bound(i)),
            Source::Synthesized => self.synthesized_tokens[w],
        }
    }

    /// The caller's index of message `w`, None for a synthesized result.
    pub fn original(&self, w: usize) -> Option<usize> {
        match self.source[w] {
            Source::Original(i) => Some(i),
            Source::Synthesized => None,
        }
    }

    /// The caller's messages of unit `u` as a span (None when it holds only synthesized ones).
    pub fn original_span(&self, u: &Unit) -> Option<Span> {
        let originals: Vec<usize> = (u.start..u.end).filter_map(|w| self.original(w)).collect();
        Some(Span {
            start: *originals.first()?,
            end: originals.last()? + 1,
        })
    }
}

pub(super) fn build_work<'r, 'a>(
    req: &'r Request<'a>,
    synthesized: &'r [Message],
    repairs: &[pairing::Repair],
) -> Work<'r, 'a> {
    let n = req.len();
    let cap = n + synthesized.len();
    let mut work = Work {
        req,
        msgs: Vec::with_capacity(cap),
        source: Vec::with_capacity(cap),
        synthesized_tokens: Vec::with_capacity(cap),
    };
    let mut next = 0;
    for i in 0..=n {
        while next < repairs.len() && repairs[next].at == i {
            work.msgs.push(&synthesized[next]);
            work.source.push(Source::Synthesized);
            work.synthesized_tokens
                .push(req.inserted_tokens(&synthesized[next]));
            next += 1;
        }
        if i < n {
            work.msgs.push(req.message(i));
            work.source.push(Source::Original(i));
            work.synthesized_tokens.push(0);
        }
    }
    work
}
