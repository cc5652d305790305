//! Errors of the core. Plain Rust: the binding maps each variant to the matching Python
//! exception, so a caller always gets a typed error with the fields it needs.

use std::fmt;

use crate::pairing::PairingIssue;

/// Tokens of each bucket of a request, reported when the protected part alone does not fit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BucketTokens {
    pub prefix: u64,
    pub middle: u64,
    pub suffix: u64,
    pub tools: u64,
    pub insertions: u64,
    /// Per-request framing (reply priming).
    pub framing: u64,
}

impl BucketTokens {
    pub fn total(&self) -> u64 {
        self.prefix + self.middle + self.suffix + self.tools + self.insertions + self.framing
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoreError {
    /// A message (or the request, when `index` is `None`) is not of the provider's shape.
    InvalidMessage {
        index: Option<usize>,
        reason: String,
    },
    /// Tool calls and results do not pair; nothing may be sent.
    Pairing(Vec<PairingIssue>),
    /// The pairing repair asked for cannot be written in the provider's shape (a result only
    /// the caller can make): `reason` says why, in the words of the adapter it replaces.
    Unrepairable {
        reason: String,
        issues: Vec<PairingIssue>,
    },
    /// The protected part of the request does not fit the budget.
    BudgetExceeded {
        tokens: u64,
        budget: u64,
        buckets: BucketTokens,
    },
    /// A configuration value is out of its range.
    Config { key: String, reason: String },
    /// A request body (the gateway path) is not a JSON object of the provider's shape.
    InvalidBody { reason: String },
    /// A previous plan to replay does not describe this request (the history changed).
    StaleState { reason: String },
}

impl CoreError {
    pub fn invalid(index: usize, reason: impl Into<String>) -> Self {
        CoreError::InvalidMessage {
            index: Some(index),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreError::InvalidMessage {
                index: Some(i),
                reason,
            } => write!(f, "messages[{i}]: {reason}"),
            CoreError::InvalidMessage {
                index: None,
                reason,
            } => write!(f, "{reason}"),
            CoreError::Pairing(issues) => {
                write!(f, "tool call pairing is broken ({} issue", issues.len())?;
                if issues.len() != 1 {
                    write!(f, "s")?;
                }
                write!(f, ")")?;
                for issue in issues {
                    write!(f, "\n  messages[{}]: {}", issue.index, issue.message)?;
                }
                Ok(())
            }
            CoreError::BudgetExceeded {
                tokens,
                budget,
                buckets,
            } => write!(
                f,
                "the protected part of the request needs {tokens} tokens but the budget is \
                 {budget} (prefix {}, suffix {}, tools {}, insertions {}, framing {}; \
                 middle left {})",
                buckets.prefix,
                buckets.suffix,
                buckets.tools,
                buckets.insertions,
                buckets.framing,
                buckets.middle
            ),
            CoreError::StaleState { reason } => write!(f, "the assembly state is stale: {reason}"),
            CoreError::Unrepairable { reason, .. } => write!(f, "{reason}"),
            CoreError::InvalidBody { reason } => write!(f, "{reason}"),
            CoreError::Config { key, reason } => write!(f, "config `{key}`: {reason}"),
        }
    }
}

impl std::error::Error for CoreError {}
