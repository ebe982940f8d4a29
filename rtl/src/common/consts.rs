//! Constant builders shared by the blocks (`Constant<>` fields are how numbers enter `#[hdl_gen]` code).

use crate::common::gf2::Gf2Map;
use rust_hdl::prelude::*;

/// An N-bit constant (N <= 64).
pub fn k<const N: usize>(v: u64) -> Constant<Bits<N>> {
    assert!(N <= 64 && (N == 64 || v >> N == 0), "{v:#x} does not fit {N} bits");
    let mut b = Bits::<N>::default();
    for i in 0..N.div_ceil(32) {
        let w = (v >> (32 * i)) & 0xFFFF_FFFF;
        for j in 0..32.min(N - 32 * i) {
            b = b.replace_bit(32 * i + j, w >> j & 1 == 1);
        }
    }
    Constant::new(b)
}

/// The `tkeep` of a beat holding its first `n` bytes (n >= 64: all).
pub fn keep_thermo(n: usize) -> Constant<Bits<64>> {
    k(if n >= 64 { u64::MAX } else { (1u64 << n) - 1 })
}

/// A 512-bit mask of the first `n` bytes of a beat.
pub fn byte_mask(n: usize) -> Constant<Bits<512>> {
    let mut b = Bits::<512>::default();
    for i in 0..n {
        b.set_bits::<8>(8 * i, bits::<8>(0xFF));
    }
    Constant::new(b)
}

/// n - 1 for a contiguous `tkeep` of n ones, as parities: bit j is the parity of the keep bits at the
/// multiples of 2^j (no priority encoder).
pub fn keep_count_map() -> Gf2Map<64, 6> {
    Gf2Map::new((0..6).map(|j| (1..64).filter(|p| p % (1 << j) == 0).fold(0u64, |m, p| m | 1 << p)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keep_count_is_n_minus_one() {
        let rows: Vec<u64> =
            (0..6).map(|j| (1..64).filter(|p| p % (1 << j) == 0).fold(0u64, |m, p| m | 1 << p)).collect();
        for n in 1..=64usize {
            let keep = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            assert_eq!(Gf2Map::<64, 6>::apply(&rows, keep), (n - 1) as u64);
        }
        assert_eq!(k::<64>(u64::MAX).val().get_bits::<32>(32).to_u32(), 0xFFFF_FFFF);
        assert_eq!(k::<7>(100).val().to_u64(), 100);
    }
}
