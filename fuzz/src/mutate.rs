//! Mutations of a valid encoding, the kinds a coverage-guided fuzzer finds productive on
//! binary formats: flip a bit, set a byte or a 16/32-bit word to a boundary value, cut the
//! input short, grow it, drop or duplicate a region, or splice in part of another valid
//! encoding. One to four of them per input, so that most inputs are near-valid and reach the
//! checks deep in a decoder instead of failing its first length check.

use crate::gen::Gen;

/// Applies one to four random mutations to `bytes`; `other` is another valid encoding of the
/// same format to splice from.
pub fn mutate(g: &mut Gen, bytes: &mut Vec<u8>, other: &[u8]) {
    for _ in 0..g.range(1..=4) {
        mutate_once(g, bytes, other);
    }
}

fn mutate_once(g: &mut Gen, bytes: &mut Vec<u8>, other: &[u8]) {
    let len = bytes.len();
    let at = |g: &mut Gen| if len == 0 { 0 } else { g.range(0..len) };
    match g.range(0..9) {
        0 if len > 0 => {
            let i = at(g);
            bytes[i] ^= 1 << g.range(0..8);
        }
        1 if len > 0 => {
            let i = at(g);
            bytes[i] = g.pick(&[0, 1, 2, 0x0f, 0x10, 0x3f, 0x40, 0x7f, 0x80, 0xfe, 0xff]);
        }
        2 if len >= 2 => {
            let i = g.range(0..len - 1);
            let word: u16 = g.pick(&[0, 1, 0x00ff, 0x7fff, 0x8000, 0xffff]);
            let word = if g.bool() { word.to_le_bytes() } else { word.to_be_bytes() };
            bytes[i..i + 2].copy_from_slice(&word);
        }
        3 if len >= 4 => {
            let i = g.range(0..len - 3);
            let word: u32 = g.pick(&[0, 1, 0xff, 0xffff, 0x7fff_ffff, 0x8000_0000, u32::MAX]);
            let word = if g.bool() { word.to_le_bytes() } else { word.to_be_bytes() };
            bytes[i..i + 4].copy_from_slice(&word);
        }
        4 => bytes.truncate(at(g)),
        5 => {
            let extra = g.bytes(1..=16);
            let i = if len == 0 { 0 } else { g.range(0..=len) };
            bytes.splice(i..i, extra);
        }
        6 if len > 0 => {
            let from = at(g);
            let to = g.range(from..=len);
            bytes.drain(from..to);
        }
        7 if len > 0 => {
            let from = at(g);
            let to = g.range(from..=len.min(from + 32));
            let copy = bytes[from..to].to_vec();
            let i = g.range(0..=len);
            bytes.splice(i..i, copy);
        }
        8 if !other.is_empty() => {
            let cut = g.range(0..=len);
            let from = g.range(0..other.len());
            bytes.truncate(cut);
            bytes.extend_from_slice(&other[from..]);
        }
        _ => {
            let byte = g.u8();
            bytes.push(byte);
        }
    }
}
