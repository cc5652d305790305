//! Image prices of the providers whose formulas differ from OpenAI's, so one canonical image
//! part is priced as the provider that will receive it bills it.

use super::image::image_tokens;
use crate::view::Image;

/// Which provider's published formula prices an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ImageFormula {
    /// 85 + 170 per 512-pixel tile after resizing (OpenAI vision guide).
    OpenAi,
    /// width × height / 750 (or the 28-pixel patches of the current guide, whichever is
    /// more) after resizing to a 1568-pixel long edge, at most about 1640 tokens (Anthropic
    /// vision guide; Bedrock serves the same Claude models).
    Anthropic,
    /// 258 per image up to 384 × 384, else 258 per 768 × 768 tile (Gemini API docs).
    Gemini,
}

impl ImageFormula {
    pub fn from_name(name: &str) -> Option<ImageFormula> {
        match name {
            "openai" => Some(ImageFormula::OpenAi),
            "anthropic" => Some(ImageFormula::Anthropic),
            "gemini" => Some(ImageFormula::Gemini),
            _ => None,
        }
    }
}

const ANTHROPIC_LONG_EDGE: f64 = 1568.0;
const ANTHROPIC_PIXELS_PER_TOKEN: f64 = 750.0;
const ANTHROPIC_PATCH: f64 = 28.0;
/// Anthropic scales larger images down to "about 1600" tokens, but its own table of largest
/// sizes reaches 1639 (784 × 1568); also the price of an image of unknown size.
pub const ANTHROPIC_MAX_TOKENS: u32 = 1640;

const GEMINI_TOKENS: u32 = 258;
const GEMINI_SMALL_SIDE: u32 = 384;
const GEMINI_TILE_SIDE: u32 = 768;
/// Gemini publishes no largest tile count; an image of unknown size is priced at a 3072 × 3072
/// image's 16 tiles, the size above which its docs recommend resizing.
pub const GEMINI_UNKNOWN_TOKENS: u32 = 16 * GEMINI_TOKENS;

/// Tokens of one image under `formula`.
pub fn image_tokens_for(img: &Image, formula: ImageFormula) -> u32 {
    match formula {
        ImageFormula::OpenAi => image_tokens(img),
        ImageFormula::Anthropic => match img.size {
            Some((w, h)) if w > 0 && h > 0 => {
                let (w, h) = (f64::from(w), f64::from(h));
                let scale = (ANTHROPIC_LONG_EDGE / w.max(h)).min(1.0);
                let (w, h) = (w * scale, h * scale);
                let by_area = (w * h / ANTHROPIC_PIXELS_PER_TOKEN).ceil();
                let by_patches = (w / ANTHROPIC_PATCH).ceil() * (h / ANTHROPIC_PATCH).ceil();
                (by_area.max(by_patches) as u32).min(ANTHROPIC_MAX_TOKENS)
            }
            _ => ANTHROPIC_MAX_TOKENS,
        },
        ImageFormula::Gemini => match img.size {
            Some((w, h)) if w <= GEMINI_SMALL_SIDE && h <= GEMINI_SMALL_SIDE => GEMINI_TOKENS,
            Some((w, h)) => {
                // Sizes come from the image's own header, so a hostile one can claim any
                // size: the tile product needs 64 bits (65,536 tiles a side wraps 32 to 0).
                let tiles = u64::from(w.div_ceil(GEMINI_TILE_SIDE))
                    * u64::from(h.div_ceil(GEMINI_TILE_SIDE));
                u32::try_from(tiles.saturating_mul(u64::from(GEMINI_TOKENS))).unwrap_or(u32::MAX)
            }
            None => GEMINI_UNKNOWN_TOKENS,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::Detail;

    fn img(size: Option<(u32, u32)>) -> Image {
        Image {
            detail: Detail::Auto,
            size,
        }
    }

    #[test]
    fn anthropic_examples() {
        // The Anthropic guide's table: 1000×1000 ≈ 1334, 1092×1092 ≈ 1590, 784×1568 = 1639;
        // a 200×200 image is 8×8 = 64 patches of 28 px, more than 200·200/750 ≈ 54.
        let f = ImageFormula::Anthropic;
        assert_eq!(image_tokens_for(&img(Some((200, 200))), f), 64);
        assert_eq!(image_tokens_for(&img(Some((1000, 1000))), f), 1334);
        assert_eq!(image_tokens_for(&img(Some((1092, 1092))), f), 1590);
        assert_eq!(image_tokens_for(&img(Some((784, 1568))), f), 1640);
        assert_eq!(
            image_tokens_for(&img(Some((4000, 3000))), f),
            ANTHROPIC_MAX_TOKENS
        );
        assert_eq!(image_tokens_for(&img(None), f), ANTHROPIC_MAX_TOKENS);
    }

    #[test]
    fn gemini_examples() {
        let f = ImageFormula::Gemini;
        assert_eq!(image_tokens_for(&img(Some((384, 200))), f), 258);
        assert_eq!(image_tokens_for(&img(Some((1024, 768))), f), 2 * 258);
        assert_eq!(image_tokens_for(&img(None), f), GEMINI_UNKNOWN_TOKENS);
    }

    #[test]
    fn hostile_sizes_cost_the_most_not_the_least() {
        // A header claiming 50,331,648 pixels a side: 65,536 tiles a side.
        let huge = img(Some((50_331_648, 50_331_648)));
        assert_eq!(image_tokens_for(&huge, ImageFormula::Gemini), u32::MAX);
        assert_eq!(
            image_tokens_for(&img(Some((u32::MAX, u32::MAX))), ImageFormula::Gemini),
            u32::MAX
        );
        for formula in [
            ImageFormula::OpenAi,
            ImageFormula::Anthropic,
            ImageFormula::Gemini,
        ] {
            for side in [1u32, 385, 769, 65_536, 1 << 31, u32::MAX] {
                let small = image_tokens_for(&img(Some((side, 1))), formula);
                let large = image_tokens_for(&img(Some((side, side))), formula);
                assert!(large >= small, "{formula:?} {side}: {large} < {small}");
            }
        }
    }

    #[test]
    fn openai_is_the_vision_guide() {
        assert_eq!(
            image_tokens_for(&img(Some((1024, 1024))), ImageFormula::OpenAi),
            765
        );
    }
}
