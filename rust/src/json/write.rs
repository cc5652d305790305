//! Strings written as JSON, eight bytes at a time to the next escape: the body path and the
//! providers' insertions write every string they render with it.

/// `s` as a JSON string.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    write_utf8(out, s.as_bytes());
}

/// The UTF-8 text `bytes` as a JSON string (the bytes are copied as they are, so text that is
/// not UTF-8 stays so, and the parser reading it refuses it).
pub(crate) fn write_utf8(out: &mut Vec<u8>, bytes: &[u8]) {
    write_escaped(out, bytes, false);
}

/// `s` as a JSON string as Python's `json` writes it with `ensure_ascii=False`: `\b` and `\f`
/// by their short escapes where `write_str` spells them `\u0008` and `\u000c` (the tools'
/// JSON is counted by its text, and must be the text the adapters wrote).
pub(crate) fn write_str_as_python(out: &mut Vec<u8>, s: &str) {
    write_escaped(out, s.as_bytes(), true);
}

#[inline]
fn write_escaped(out: &mut Vec<u8>, bytes: &[u8], short_controls: bool) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // `bytes[start..i]` is yet to be copied: it needs no escape.
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        // Eight bytes at a time to the first that may need an escape: most text has few, and
        // a byte at a time made writing a long text slower than the serializer it stands in
        // for. The lowest lane flagged is always one that does.
        if let Some(word) = bytes.get(i..i + 8) {
            let flagged = escapes(u64::from_le_bytes(word.try_into().unwrap_or([0; 8])));
            if flagged == 0 {
                i += 8;
                continue;
            }
            i += (flagged.trailing_zeros() / 8) as usize;
        }
        let escape: &[u8] = match bytes[i] {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 if short_controls => b"\\b",
            0x0c if short_controls => b"\\f",
            b @ 0..=0x1f => &[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ],
            _ => {
                i += 1;
                continue;
            }
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(escape);
        i += 1;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// The high bit of each lane of `word` (eight bytes, little-endian) that may be a control
/// byte, a quote or a backslash: the bit tricks find a byte below 0x20, or a zero byte after
/// an xor, in every lane at once. A lane is flagged falsely only above one flagged truly.
fn escapes(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x & HIGH;
    below(word, 0x20)
        | below(word ^ (ONES * u64::from(b'"')), 1)
        | below(word ^ (ONES * u64::from(b'\\')), 1)
}
