//! What crosses: the portable conversation reduced to the parts a target can take. History a
//! compaction replaced is left out (the source's provider reads nothing before it); a
//! compaction becomes its summary; reasoning becomes text or is left out; provider-bound
//! payloads are left out; media the target cannot carry and parts with no equivalent are
//! refused or made placeholders. Each of these is reported.

use super::portable::{Conversation, Part, Source, Speaker, Turn};
use super::{Options, Reasoning, Report, Unsupported};
use crate::error::CoreError;

/// Where a part sits, for what the target can carry there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    User,
    Assistant,
    /// A system or developer message: text only, in every provider.
    Instruction,
    Result,
}

/// Settles `conversation` for `target`, reporting each change; also gives how many changes
/// the report held when the first turn of source item `cut` or later came (where a later
/// translation of the same session resumes: `resume`).
pub fn settle(
    source: &str,
    target: &str,
    mut conversation: Conversation,
    options: &Options,
    report: &mut Report,
    cut: usize,
) -> Result<(Conversation, usize), CoreError> {
    for (item, what, why) in std::mem::take(&mut conversation.left_out) {
        report.add(Some(item), "dropped", what, why);
    }
    let latest = latest_compaction(&conversation);
    let mut turns = Vec::with_capacity(conversation.turns.len());
    let mut at_cut = None;
    for (k, turn) in std::mem::take(&mut conversation.turns)
        .into_iter()
        .enumerate()
    {
        if turn.item >= cut && at_cut.is_none() {
            at_cut = Some(report.changes.len());
        }
        if latest.is_some_and(|at| k < at) && !turn.speaker.is_instruction() {
            report.add(
                Some(turn.item),
                "dropped",
                "before_compaction",
                "the source's provider reads nothing before its latest compaction, which \
                 stands for it",
            );
            continue;
        }
        let place = match turn.speaker {
            Speaker::Assistant => Place::Assistant,
            Speaker::System | Speaker::Developer => Place::Instruction,
            _ => Place::User,
        };
        let mut parts = Vec::with_capacity(turn.parts.len());
        for part in turn.parts {
            settle_part(
                source, target, turn.item, part, place, options, report, &mut parts,
            )?;
        }
        turns.push(Turn { parts, ..turn });
    }
    conversation.turns = turns;
    Ok((conversation, at_cut.unwrap_or(report.changes.len())))
}

/// The turn of the latest compaction, before which the source's provider reads nothing.
fn latest_compaction(c: &Conversation) -> Option<usize> {
    c.turns
        .iter()
        .rposition(|t| t.parts.iter().any(|p| matches!(p, Part::Compaction { .. })))
}

/// The source items of the opaque compactions a translation keeps (the latest one's).
pub fn opaque(c: &Conversation) -> Vec<usize> {
    let Some(at) = latest_compaction(c) else {
        return Vec::new();
    };
    c.turns[at..]
        .iter()
        .filter(|t| {
            t.parts
                .iter()
                .any(|p| matches!(p, Part::Compaction { summary: None }))
        })
        .map(|t| t.item)
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn settle_part(
    source: &str,
    target: &str,
    item: usize,
    part: Part,
    place: Place,
    options: &Options,
    report: &mut Report,
    out: &mut Vec<Part>,
) -> Result<(), CoreError> {
    match part {
        Part::Text(_) | Part::Call { .. } => out.push(part),
        Part::Image(ref source_of)
        | Part::Document {
            source: ref source_of,
            ..
        } => {
            let image = matches!(part, Part::Image(_));
            if carries(source, target, place, image, source_of) {
                out.push(part);
            } else {
                let what = if image { "image" } else { "document" };
                let text = format!("[{what} omitted: {}]", source_of.describe());
                unsupported(item, what, text, target, options, report, out)?;
            }
        }
        Part::Result {
            id,
            content,
            is_error,
        } => {
            let mut kept = Vec::with_capacity(content.len());
            for p in content {
                settle_part(
                    source,
                    target,
                    item,
                    p,
                    Place::Result,
                    options,
                    report,
                    &mut kept,
                )?;
            }
            out.push(Part::Result {
                id,
                content: kept,
                is_error,
            });
        }
        Part::Reasoning { text, bound } => {
            if let Some(kind) = bound {
                report.add(
                    Some(item),
                    "dropped",
                    kind.as_str(),
                    format!("bound to {source}: no other provider can verify it"),
                );
            }
            match (text, options.reasoning) {
                (Some(text), Reasoning::Text) => {
                    report.add(
                        Some(item),
                        "as_text",
                        "reasoning",
                        "readable reasoning sent as text",
                    );
                    out.push(Part::Text(text));
                }
                (Some(_), Reasoning::Drop) => report.add(
                    Some(item),
                    "dropped",
                    "reasoning",
                    "readable reasoning left out (reasoning=\"drop\")",
                ),
                (None, _) => {}
            }
        }
        Part::Bound(kind) => report.add(
            Some(item),
            "dropped",
            kind.as_str(),
            format!("bound to {source}: no other provider can read it"),
        ),
        Part::Compaction {
            summary: Some(text),
        } => {
            report.add(
                Some(item),
                "as_text",
                "compaction",
                "the compaction's summary sent as text",
            );
            out.push(Part::Text(text));
        }
        Part::Compaction { summary: None } => {
            let given = options.summaries.iter().find(|(at, _)| *at == item);
            match given {
                Some((_, text)) => {
                    report.add(
                        Some(item),
                        "summarized",
                        "compaction",
                        "an opaque compaction item replaced by the summary the summarizer wrote",
                    );
                    out.push(Part::Text(text.clone()));
                }
                None => {
                    return Err(CoreError::invalid(
                        item,
                        format!(
                            "an opaque compaction item (encrypted_content only) cannot be \
                             translated to {target}: only {source} can read it; pass a \
                             summarizer to summarize what it stood for"
                        ),
                    ))
                }
            }
        }
        Part::Other { what } => {
            let text = format!("[{what} omitted]");
            unsupported(item, &what, text, target, options, report, out)?;
        }
    }
    Ok(())
}

fn unsupported(
    item: usize,
    what: &str,
    placeholder: String,
    target: &str,
    options: &Options,
    report: &mut Report,
    out: &mut Vec<Part>,
) -> Result<(), CoreError> {
    match options.unsupported {
        Unsupported::Refuse => Err(CoreError::invalid(
            item,
            format!(
                "{what} has no equivalent in {target} here (pass unsupported=\"placeholder\" \
                 to send a text in its place)"
            ),
        )),
        Unsupported::Placeholder => {
            report.add(Some(item), "placeholder", what, placeholder.clone());
            out.push(Part::Text(placeholder));
            Ok(())
        }
    }
}

/// Whether `target` carries an image (or a document) from `source_of` at `place`.
pub fn carries(source: &str, target: &str, place: Place, image: bool, source_of: &Source) -> bool {
    let openai = |p: &str| p.starts_with("openai_");
    if matches!(place, Place::Assistant | Place::Instruction) {
        return false;
    }
    let mime = source_of.mime().unwrap_or("");
    match source_of {
        // A stored file is read only by the provider that stores it.
        Source::FileId(_) => {
            openai(source)
                && openai(target)
                && !(target == "openai_chat" && image)
                && !(target == "openai_chat" && place == Place::Result)
        }
        Source::S3 { .. } => target == "bedrock_converse" && (image || !mime.is_empty()),
        Source::Base64 { .. } | Source::Url { .. } => {
            let inline = matches!(source_of, Source::Base64 { .. });
            match target {
                "openai_chat" => place == Place::User && (image || inline),
                "openai_responses" => true,
                "anthropic" => {
                    image
                        || mime == "application/pdf"
                        || (inline && mime == "text/plain")
                        || (!inline && mime.is_empty())
                }
                // A URL needs its media type, and goes only in a user turn (not a result).
                "gemini" => inline || !mime.is_empty() && place == Place::User,
                "bedrock_converse" => {
                    inline
                        && if image {
                            super::write::bedrock::image_format(mime).is_some()
                        } else {
                            super::write::bedrock::document_format(mime).is_some()
                        }
                }
                _ => false,
            }
        }
    }
}
