//! ringbound's core: the canonical view of a request, exact token counts, tool-call pairing,
//! and the stage loop that plans which messages the next request keeps. No Python here; the
//! binding lives in `py` behind the `python` feature.

pub mod body;
pub mod cache;
pub mod count;
pub mod error;
pub mod identifiers;
pub mod json;
pub mod json_array;
pub mod ledger;
pub mod native;
pub mod native_body;
pub mod pairing;
pub mod plan;
pub mod providers;
pub mod readings;
pub mod request;
pub mod rewrite;
pub mod summary;
pub mod translate;
pub mod units;
pub mod view;

#[cfg(feature = "python")]
mod py;

#[cfg(test)]
mod layering;

pub use error::{BucketTokens, CoreError};
pub use pairing::{IssueKind, PairingIssue};
pub use plan::{plan, Item, Plan, PlanConfig, Stage};
pub use view::{Detail, Image, Message, Role, ToolCall};
