//! Provider parsers: each turns one provider's wire format into the canonical view.

pub mod openai_chat;
