//! What an image costs: OpenAI's published vision formula for the gpt-4o / gpt-4.1 family
//! (85 base tokens plus 170 per 512px tile), and the pixel size it needs, read from the header
//! of a data URL's image without decoding the image or even the whole base64 payload.

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;

use crate::view::{Detail, Image};

/// Every image costs this; a `low` detail image costs nothing more.
const BASE_TOKENS: u32 = 85;
const TOKENS_PER_TILE: u32 = 170;
const TILE_SIDE: u64 = 512;
/// A high detail image is first scaled down to fit a square of this side...
const FIT_SIDE: u64 = 2048;
/// ...then, if its shortest side is longer than this, scaled down to make it this long.
const SHORT_SIDE: u64 = 768;

/// The cost of a high detail image of unknown size. Budgets must never be exceeded, so this is
/// the formula's maximum: after both scalings the long side is at most 2048 (4 tiles) and the
/// short side at most 768 (2 tiles), and a 768x2048 image reaches both.
const UNKNOWN_SIZE_TOKENS: u32 = high_detail_tokens(SHORT_SIDE as u32, FIT_SIDE as u32);

/// Tokens one image costs. `Auto` is priced as `High`, the more expensive reading.
pub fn image_tokens(img: &Image) -> u32 {
    match (img.detail, img.size) {
        (Detail::Low, _) => BASE_TOKENS,
        (Detail::High | Detail::Auto, Some((width, height))) if width > 0 && height > 0 => {
            high_detail_tokens(width, height)
        }
        // No size, or a size no image has: assume the costliest.
        (Detail::High | Detail::Auto, _) => UNKNOWN_SIZE_TOKENS,
    }
}

/// The formula on exact rationals: scaling by `num / den` is never rounded before the tiles
/// are counted, so the count is never below what integer-pixel resizing would give.
const fn high_detail_tokens(width: u32, height: u32) -> u32 {
    let (w, h) = (width as u64, height as u64);
    let (long, short) = if w > h { (w, h) } else { (h, w) };
    let (mut num, mut den) = (1, 1);
    if long > FIT_SIDE {
        num = FIT_SIDE;
        den = long;
    }
    // The two scalings compose to 768 / short when the second one applies.
    if short * num > SHORT_SIDE * den {
        num = SHORT_SIDE;
        den = short;
    }
    let tiles = (w * num).div_ceil(den * TILE_SIDE) * (h * num).div_ceil(den * TILE_SIDE);
    // At most 4 x 2 tiles after scaling, so the cast is exact.
    BASE_TOKENS + TOKENS_PER_TILE * tiles as u32
}

/// Decoded bytes read for a header: enough to walk a JPEG past typical EXIF and ICC segments
/// to its frame header, small enough to decode in microseconds whatever the image's size.
const HEADER_BYTES: usize = 64 * 1024;
/// The base64 characters that decode to at most `HEADER_BYTES` (a multiple of 4).
const ENCODED_PREFIX: usize = HEADER_BYTES / 3 * 4;

/// Accepts a payload with or without its final padding, as browsers do.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

/// Pixel size from a `data:image/...;base64,...` URL, decoding only a bounded prefix of the
/// base64 (never the whole payload: a 5 MB image must cost microseconds). Reads PNG (IHDR), GIF,
/// WebP (VP8, VP8L, VP8X) and JPEG (its segments walked to the SOFn marker; `None` if that lies
/// beyond the prefix). Garbage, truncated or non-image data gives `None`, never a panic, and so
/// does a remote URL. The format is sniffed from the bytes, not taken from the media type.
pub fn image_size_from_data_url(url: &str) -> Option<(u32, u32)> {
    if !url.as_bytes().get(..5)?.eq_ignore_ascii_case(b"data:") {
        return None;
    }
    let (meta, payload) = url[5..].split_once(',')?;
    let meta = meta.as_bytes();
    if meta.len() < 7 || !meta[meta.len() - 7..].eq_ignore_ascii_case(b";base64") {
        return None;
    }
    image_size_from_base64(payload)
}

/// Pixel size of a base64 image payload (no data URL around it: providers such as Anthropic
/// send the media type and the data apart), read as [`image_size_from_data_url`] reads one.
pub fn image_size_from_base64(payload: &str) -> Option<(u32, u32)> {
    let payload = payload.as_bytes();
    let prefix = if payload.len() > ENCODED_PREFIX {
        &payload[..ENCODED_PREFIX]
    } else {
        payload
    };
    let header = BASE64.decode(prefix).ok()?;
    let (width, height) = pixel_size(&header)?;
    (width > 0 && height > 0).then_some((width, height))
}

fn pixel_size(b: &[u8]) -> Option<(u32, u32)> {
    if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        png(b)
    } else if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        Some((le16(b, 6)?, le16(b, 8)?))
    } else if b.starts_with(b"RIFF") && b.get(8..12) == Some(b"WEBP") {
        webp(b)
    } else if b.starts_with(&[0xFF, 0xD8]) {
        jpeg(b)
    } else {
        None
    }
}

/// The IHDR chunk comes first, right after the signature.
fn png(b: &[u8]) -> Option<(u32, u32)> {
    if b.get(12..16)? != b"IHDR" {
        return None;
    }
    Some((be32(b, 16)?, be32(b, 20)?))
}

/// The first chunk after the RIFF header says which of the three bitstreams follows.
fn webp(b: &[u8]) -> Option<(u32, u32)> {
    match b.get(12..16)? {
        // Lossy: a 3-byte frame tag, the start code, then 14-bit sizes (2 bits of scaling above).
        b"VP8 " => {
            if b.get(23..26)? != [0x9D, 0x01, 0x2A] {
                return None;
            }
            Some((le16(b, 26)? & 0x3FFF, le16(b, 28)? & 0x3FFF))
        }
        // Lossless: a signature byte, then width-1 and height-1 in 14 bits each.
        b"VP8L" => {
            if *b.get(20)? != 0x2F {
                return None;
            }
            let bits = le32(b, 21)?;
            Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
        }
        // Extended: flags and reserved bytes, then canvas width-1 and height-1 in 24 bits each.
        b"VP8X" => Some((le24(b, 24)? + 1, le24(b, 27)? + 1)),
        _ => None,
    }
}

/// Walks the segments to the first start-of-frame marker, which holds the size; EXIF and ICC
/// segments come before it, so it can lie kilobytes in.
fn jpeg(b: &[u8]) -> Option<(u32, u32)> {
    let mut at = 2;
    loop {
        if *b.get(at)? != 0xFF {
            return None;
        }
        // A marker may be preceded by any number of 0xFF fill bytes.
        while *b.get(at)? == 0xFF {
            at += 1;
        }
        let marker = b[at];
        at += 1;
        match marker {
            // Standalone markers carry no length.
            0x01 | 0xD0..=0xD7 => {}
            // A second image start, the image end, or scan data before any frame header.
            0xD8..=0xDA => return None,
            // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC): length, precision, height,
            // width.
            0xC0..=0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF => {
                return Some((be16(b, at + 5)?, be16(b, at + 3)?));
            }
            _ => {
                let length = be16(b, at)? as usize;
                if length < 2 {
                    return None;
                }
                at += length;
            }
        }
    }
}

fn bytes<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?)?.try_into().ok()
}

fn be16(b: &[u8], at: usize) -> Option<u32> {
    bytes::<2>(b, at).map(|x| u16::from_be_bytes(x).into())
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    bytes::<4>(b, at).map(u32::from_be_bytes)
}

fn le16(b: &[u8], at: usize) -> Option<u32> {
    bytes::<2>(b, at).map(|x| u16::from_le_bytes(x).into())
}

fn le24(b: &[u8], at: usize) -> Option<u32> {
    bytes::<3>(b, at).map(|[x, y, z]| u32::from_le_bytes([x, y, z, 0]))
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    bytes::<4>(b, at).map(u32::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;

    fn high(width: u32, height: u32) -> u32 {
        image_tokens(&Image {
            detail: Detail::High,
            size: Some((width, height)),
        })
    }

    #[test]
    fn published_examples() {
        // The examples of OpenAI's vision guide, "Calculating costs".
        assert_eq!(high(1024, 1024), 765);
        assert_eq!(high(2048, 4096), 1105);
        for size in [Some((4096, 8192)), Some((1, 1)), None] {
            let low = Image {
                detail: Detail::Low,
                size,
            };
            assert_eq!(image_tokens(&low), 85);
        }
    }

    #[test]
    fn tile_edges() {
        assert_eq!(high(512, 512), 85 + 170);
        assert_eq!(high(513, 512), 85 + 2 * 170);
        assert_eq!(high(768, 768), 85 + 4 * 170);
        // 1920x1080 scales to 1365.3x768: 3 x 2 tiles.
        assert_eq!(high(1920, 1080), 85 + 6 * 170);
        // 4096x16 fits to 2048x8: 4 x 1 tiles, no second scaling.
        assert_eq!(high(4096, 16), 85 + 4 * 170);
        let auto = Image {
            detail: Detail::Auto,
            size: Some((2048, 4096)),
        };
        assert_eq!(image_tokens(&auto), 1105);
    }

    #[test]
    fn unknown_size_costs_the_formula_maximum() {
        assert_eq!(UNKNOWN_SIZE_TOKENS, 85 + 8 * 170);
        let mut max = 0;
        let sides = (1..=5000)
            .step_by(7)
            .chain([
                511, 512, 513, 767, 768, 769, 1023, 1024, 1025, 2047, 2048, 2049,
            ])
            .chain([u32::MAX / 2, u32::MAX]);
        let sides: Vec<u32> = sides.collect();
        for &w in &sides {
            for &h in &sides {
                max = max.max(high(w, h));
            }
        }
        assert_eq!(max, UNKNOWN_SIZE_TOKENS);
        assert_eq!(high(768, 2048), UNKNOWN_SIZE_TOKENS);
        for detail in [Detail::High, Detail::Auto] {
            for size in [None, Some((0, 100)), Some((100, 0))] {
                assert_eq!(image_tokens(&Image { detail, size }), 1445);
            }
        }
    }

    fn data_url(mime: &str, bytes: &[u8]) -> String {
        format!("data:{mime};base64,{}", STANDARD.encode(bytes))
    }

    fn png(width: u32, height: u32) -> Vec<u8> {
        let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        b.extend(width.to_be_bytes());
        b.extend(height.to_be_bytes());
        b.extend([8, 6, 0, 0, 0, 0x12, 0x34, 0x56, 0x78]);
        b
    }

    fn gif(width: u16, height: u16) -> Vec<u8> {
        let mut b = b"GIF89a".to_vec();
        b.extend(width.to_le_bytes());
        b.extend(height.to_le_bytes());
        b.extend([0x80, 0, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, b';']);
        b
    }

    fn riff(chunk: &[u8; 4], payload: &[u8]) -> Vec<u8> {
        let mut b = b"RIFF".to_vec();
        b.extend((payload.len() as u32 + 12).to_le_bytes());
        b.extend(b"WEBP");
        b.extend(chunk);
        b.extend((payload.len() as u32).to_le_bytes());
        b.extend(payload);
        b
    }

    fn webp_lossy(width: u16, height: u16) -> Vec<u8> {
        // Frame tag (key frame), start code, sizes with scaling bits set (they must be masked).
        let mut p = vec![0x30, 0x01, 0x00, 0x9D, 0x01, 0x2A];
        p.extend((width | 0x4000).to_le_bytes());
        p.extend((height | 0x8000).to_le_bytes());
        p.extend([0; 8]);
        riff(b"VP8 ", &p)
    }

    fn webp_lossless(width: u32, height: u32) -> Vec<u8> {
        let bits = (width - 1) | ((height - 1) << 14) | (1 << 28);
        let mut p = vec![0x2F];
        p.extend(bits.to_le_bytes());
        riff(b"VP8L", &p)
    }

    fn webp_extended(width: u32, height: u32) -> Vec<u8> {
        let mut p = vec![0x10, 0, 0, 0];
        p.extend(&(width - 1).to_le_bytes()[..3]);
        p.extend(&(height - 1).to_le_bytes()[..3]);
        riff(b"VP8X", &p)
    }

    fn segment(marker: u8, payload: &[u8]) -> Vec<u8> {
        let mut b = vec![0xFF, marker];
        b.extend((payload.len() as u16 + 2).to_be_bytes());
        b.extend(payload);
        b
    }

    /// SOI, the given segments, a baseline SOF0, then the start of scan.
    fn jpeg(width: u16, height: u16, before_frame: &[Vec<u8>]) -> Vec<u8> {
        let mut b = vec![0xFF, 0xD8];
        for s in before_frame {
            b.extend(s);
        }
        let mut sof = vec![8];
        sof.extend(height.to_be_bytes());
        sof.extend(width.to_be_bytes());
        sof.extend([1, 1, 0x11, 0]);
        b.extend(segment(0xC0, &sof));
        b.extend(segment(0xDA, &[1, 1, 0, 0, 63, 0]));
        b
    }

    fn jfif() -> Vec<u8> {
        segment(0xE0, b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0")
    }

    #[test]
    fn reads_hand_built_headers() {
        let cases = [
            (data_url("image/png", &png(3, 5)), (3, 5)),
            (data_url("image/png", &png(70_000, 1)), (70_000, 1)),
            (data_url("image/gif", &gif(640, 480)), (640, 480)),
            (
                data_url("image/webp", &webp_lossy(1024, 16383)),
                (1024, 16383),
            ),
            (data_url("image/webp", &webp_lossless(3, 16384)), (3, 16384)),
            (
                data_url("image/webp", &webp_extended(16_777_216, 9)),
                (16_777_216, 9),
            ),
            (
                data_url("image/jpeg", &jpeg(1920, 1080, &[jfif()])),
                (1920, 1080),
            ),
            // The declared type is not trusted; the bytes decide.
            (data_url("image/jpeg", &png(7, 9)), (7, 9)),
            (
                format!("DATA:image/png;BASE64,{}", STANDARD.encode(png(2, 4))),
                (2, 4),
            ),
        ];
        for (url, size) in cases {
            assert_eq!(image_size_from_data_url(&url), Some(size), "{url}");
        }
    }

    #[test]
    fn jpeg_walks_segments_fill_bytes_and_markers() {
        let exif = segment(0xE1, &[0xAB; 20_000]);
        let icc = segment(0xE2, &[0xCD; 30_000]);
        let dqt = segment(0xDB, &[0; 65]);
        let mut fill = vec![0xFF, 0xFF, 0xFF];
        fill.extend(segment(0xFE, b"comment"));
        let progressive = {
            let mut b = jpeg(300, 200, &[jfif(), exif.clone(), icc, dqt, fill]);
            let sof = b.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
            b[sof + 1] = 0xC2;
            b
        };
        assert_eq!(
            image_size_from_data_url(&data_url("image/jpeg", &progressive)),
            Some((300, 200))
        );
        // A Huffman table (C4) is not a frame header even though it sits in the SOF range.
        let dht = segment(0xC4, &[0; 30]);
        assert_eq!(
            image_size_from_data_url(&data_url("image/jpeg", &jpeg(5, 6, &[dht]))),
            Some((5, 6))
        );
        // Three 60 KB segments put the frame header past the bounded prefix.
        let far = vec![segment(0xE1, &[0; 60_000]); 3];
        assert_eq!(
            image_size_from_data_url(&data_url("image/jpeg", &jpeg(5, 6, &far))),
            None
        );
    }

    /// Files written by Pillow 13, a 3x5 image in each format.
    #[test]
    fn reads_real_encoder_output() {
        let cases = [
            "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAMAAAAFCAIAAAAPE8H1AAAAF0lEQVR4nGM8wcXF\
             wMDAwMDAxAAD+FkAKyoA5lO+dr8AAAAASUVORK5CYII=",
            "data:image/gif;base64,R0lGODdhAwAFAIEAAMgKCgAAAAAAAAAAACwAAAAAAwAFAAAICAABCBxIsGBAADs=",
            "data:image/webp;base64,UklGRjwAAABXRUJQVlA4IDAAAADQAQCdASoDAAUAAUAmJaACdLoB+AADsAD+9hN\
             f/izkYjs83/4E78Cd+BO/8AAAAAA=",
            "data:image/webp;base64,UklGRh4AAABXRUJQVlA4TBEAAAAvAgABAAdQhSJXof+BiOh/AAA=",
            "data:image/webp;base64,UklGRk4AAABXRUJQVlA4WAoAAAAQAAAAAgAABAAAQUxQSA8AAAABB0AgaYu3/RE\
             RR0T0PwAAVlA4IBgAAAAwAQCdASoDAAUAAUAmJaQAA3AA/v0gUAA=",
        ];
        for url in cases {
            assert_eq!(image_size_from_data_url(url), Some((3, 5)), "{url}");
        }
    }

    #[test]
    fn rejects_what_is_not_a_readable_image() {
        let encoded = STANDARD.encode(png(3, 5));
        let cases = [
            String::new(),
            "https://example.com/cat.png".to_owned(),
            "data:".to_owned(),
            "data:image/png;base64".to_owned(),
            "data:image/png;base64,".to_owned(),
            "data:image/png;base64,!!!not base64!!!".to_owned(),
            "data:image/png;base64,é€😀".to_owned(),
            format!("data:image/png,{encoded}"),
            format!("dätä:image/png;base64,{encoded}"),
            format!("data:image/png;base64,{}", &encoded[..20]),
            data_url(
                "image/png",
                b"hello, this is plain text and no image at all",
            ),
            data_url("image/png", &png(0, 5)),
            data_url("image/gif", &gif(0, 0)),
            data_url("image/gif", b"GIF89a\x01"),
            data_url(
                "image/webp",
                &riff(b"VP8 ", &[0x30, 0x01, 0x00, 0, 0, 0, 1, 0, 1, 0]),
            ),
            data_url("image/webp", &riff(b"VP8L", &[0x00, 1, 2, 3, 4])),
            data_url("image/webp", &riff(b"ALPH", &[0; 20])),
            data_url("image/jpeg", &[0xFF, 0xD8]),
            data_url("image/jpeg", &[0xFF, 0xD8, 0xFF, 0xE0, 0x00]),
            data_url(
                "image/jpeg",
                &[0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x01, 0xFF, 0xC0],
            ),
            data_url("image/jpeg", &[0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x08]),
            data_url("image/jpeg", &[0xFF, 0xD8, 0x00, 0x00]),
            data_url("image/jpeg", &[0xFF, 0xD8, 0xFF, 0xFF, 0xFF]),
            data_url("image/jpeg", &jpeg(0, 10, &[])),
        ];
        for url in cases {
            assert_eq!(image_size_from_data_url(&url), None, "{url}");
        }
    }

    #[test]
    fn truncated_headers_never_panic() {
        let images = [
            png(3, 5),
            gif(3, 5),
            webp_lossy(3, 5),
            webp_lossless(3, 5),
            webp_extended(3, 5),
            jpeg(3, 5, &[jfif()]),
        ];
        for image in images {
            for len in 0..image.len() {
                let size = image_size_from_data_url(&data_url("image/png", &image[..len]));
                assert!(size.is_none() || size == Some((3, 5)), "{len}: {size:?}");
            }
        }
    }

    #[test]
    fn a_five_megabyte_image_decodes_only_its_header() {
        let mut image = png(4000, 3000);
        image.resize(5_000_000, 0xA5);
        let url = data_url("image/png", &image);
        assert!(url.len() > 6_000_000);
        assert_eq!(image_size_from_data_url(&url), Some((4000, 3000)));
        let mut image = jpeg(4000, 3000, &[jfif()]);
        image.resize(5_000_000, 0xA5);
        assert_eq!(
            image_size_from_data_url(&data_url("image/jpeg", &image)),
            Some((4000, 3000))
        );
    }
}
