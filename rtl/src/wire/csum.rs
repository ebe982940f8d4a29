//! Internet checksum arithmetic at line rate: [`Csum10`], the 16-bit ones-complement sum of ten words in
//! seven registered stages, no add wider than 12 bits (the ICMP echo responder's header checks and updates).
//!
//! The words are summed by byte column (high bytes and low bytes apart: two sums of ten bytes, at most 2,550,
//! in four stages), then folded: a column's carries go into the other column (2^16 = 1 in ones-complement
//! arithmetic, so the high column's carry wraps into the low one). Three folds leave both columns within 8
//! bits for every input (checked exhaustively on the column sums by `fold_model`'s test).

use rust_hdl::prelude::*;

/// `sum` = the ones-complement sum of `w[0..10]` (0xFFFF for a zero sum of non-zero words), seven cycles after
/// the words were presented.
#[derive(LogicBlock, Default)]
pub struct Csum10 {
    pub clock: Signal<In, Clock>,
    pub w: [Signal<In, Bits<16>>; 10],
    pub sum: Signal<Out, Bits<16>>,
    /// S1: byte pairs, low column in 0..5, high column in 5..10
    p: [DFF<Bits<9>>; 10],
    /// S2: per column (3 each): pairs of pairs and the fifth pair
    q: [DFF<Bits<10>>; 6],
    /// S3: per column (2 each)
    r: [DFF<Bits<11>>; 4],
    /// S4: the column sums, low and high
    c: [DFF<Bits<12>>; 2],
    /// S5..S7: the folds, low and high
    f1: [DFF<Bits<9>>; 2],
    f2: [DFF<Bits<9>>; 2],
    f3: [DFF<Bits<9>>; 2],
}

impl Logic for Csum10 {
    #[hdl_gen]
    fn update(&mut self) {
        for i in 0..10 {
            self.p[i].clock.next = self.clock.val();
        }
        for i in 0..6 {
            self.q[i].clock.next = self.clock.val();
        }
        for i in 0..4 {
            self.r[i].clock.next = self.clock.val();
        }
        for i in 0..2 {
            self.c[i].clock.next = self.clock.val();
            self.f1[i].clock.next = self.clock.val();
            self.f2[i].clock.next = self.clock.val();
            self.f3[i].clock.next = self.clock.val();
        }
        // S1: word pairs (2i, 2i+1), per column
        self.p[0].d.next = bit_cast::<9, 8>(self.w[0].val().get_bits::<8>(0)) + bit_cast::<9, 8>(self.w[1].val().get_bits::<8>(0));
        self.p[5].d.next = bit_cast::<9, 8>(self.w[0].val().get_bits::<8>(8)) + bit_cast::<9, 8>(self.w[1].val().get_bits::<8>(8));
        self.p[1].d.next = bit_cast::<9, 8>(self.w[2].val().get_bits::<8>(0)) + bit_cast::<9, 8>(self.w[3].val().get_bits::<8>(0));
        self.p[6].d.next = bit_cast::<9, 8>(self.w[2].val().get_bits::<8>(8)) + bit_cast::<9, 8>(self.w[3].val().get_bits::<8>(8));
        self.p[2].d.next = bit_cast::<9, 8>(self.w[4].val().get_bits::<8>(0)) + bit_cast::<9, 8>(self.w[5].val().get_bits::<8>(0));
        self.p[7].d.next = bit_cast::<9, 8>(self.w[4].val().get_bits::<8>(8)) + bit_cast::<9, 8>(self.w[5].val().get_bits::<8>(8));
        self.p[3].d.next = bit_cast::<9, 8>(self.w[6].val().get_bits::<8>(0)) + bit_cast::<9, 8>(self.w[7].val().get_bits::<8>(0));
        self.p[8].d.next = bit_cast::<9, 8>(self.w[6].val().get_bits::<8>(8)) + bit_cast::<9, 8>(self.w[7].val().get_bits::<8>(8));
        self.p[4].d.next = bit_cast::<9, 8>(self.w[8].val().get_bits::<8>(0)) + bit_cast::<9, 8>(self.w[9].val().get_bits::<8>(0));
        self.p[9].d.next = bit_cast::<9, 8>(self.w[8].val().get_bits::<8>(8)) + bit_cast::<9, 8>(self.w[9].val().get_bits::<8>(8));
        // S2..S4
        self.q[0].d.next = bit_cast::<10, 9>(self.p[0].q.val()) + bit_cast::<10, 9>(self.p[1].q.val());
        self.q[1].d.next = bit_cast::<10, 9>(self.p[2].q.val()) + bit_cast::<10, 9>(self.p[3].q.val());
        self.q[2].d.next = bit_cast::<10, 9>(self.p[4].q.val());
        self.r[0].d.next = bit_cast::<11, 10>(self.q[0].q.val()) + bit_cast::<11, 10>(self.q[1].q.val());
        self.r[1].d.next = bit_cast::<11, 10>(self.q[2].q.val());
        self.c[0].d.next = bit_cast::<12, 11>(self.r[0].q.val()) + bit_cast::<12, 11>(self.r[1].q.val());
        self.q[3].d.next = bit_cast::<10, 9>(self.p[5].q.val()) + bit_cast::<10, 9>(self.p[6].q.val());
        self.q[4].d.next = bit_cast::<10, 9>(self.p[7].q.val()) + bit_cast::<10, 9>(self.p[8].q.val());
        self.q[5].d.next = bit_cast::<10, 9>(self.p[9].q.val());
        self.r[2].d.next = bit_cast::<11, 10>(self.q[3].q.val()) + bit_cast::<11, 10>(self.q[4].q.val());
        self.r[3].d.next = bit_cast::<11, 10>(self.q[5].q.val());
        self.c[1].d.next = bit_cast::<12, 11>(self.r[2].q.val()) + bit_cast::<12, 11>(self.r[3].q.val());
        // S5..S7: each column's carries into the other
        self.f1[0].d.next = bit_cast::<9, 8>(self.c[0].q.val().get_bits::<8>(0)) + bit_cast::<9, 4>(self.c[1].q.val().get_bits::<4>(8));
        self.f1[1].d.next = bit_cast::<9, 8>(self.c[1].q.val().get_bits::<8>(0)) + bit_cast::<9, 4>(self.c[0].q.val().get_bits::<4>(8));
        self.f2[0].d.next = bit_cast::<9, 8>(self.f1[0].q.val().get_bits::<8>(0)) + bit_cast::<9, 1>(self.f1[1].q.val().get_bits::<1>(8));
        self.f2[1].d.next = bit_cast::<9, 8>(self.f1[1].q.val().get_bits::<8>(0)) + bit_cast::<9, 1>(self.f1[0].q.val().get_bits::<1>(8));
        self.f3[0].d.next = bit_cast::<9, 8>(self.f2[0].q.val().get_bits::<8>(0)) + bit_cast::<9, 1>(self.f2[1].q.val().get_bits::<1>(8));
        self.f3[1].d.next = bit_cast::<9, 8>(self.f2[1].q.val().get_bits::<8>(0)) + bit_cast::<9, 1>(self.f2[0].q.val().get_bits::<1>(8));
        self.sum.next = (bit_cast::<16, 8>(self.f3[1].q.val().get_bits::<8>(0)) << 8) | bit_cast::<16, 8>(self.f3[0].q.val().get_bits::<8>(0));
    }
}

/// Cycles from the words to `sum`.
pub const CSUM10_LATENCY: usize = 7;

/// The folds of [`Csum10`] on column sums (low, high), as numbers: the model its test checks exhaustively.
pub fn fold_model(lo: u32, hi: u32) -> u16 {
    let (mut l, mut h) = ((lo & 0xFF) + (hi >> 8), (hi & 0xFF) + (lo >> 8));
    for _ in 0..2 {
        (l, h) = ((l & 0xFF) + (h >> 8), (h & 0xFF) + (l >> 8));
    }
    assert!(l < 256 && h < 256, "three folds leave 8 bits");
    ((h << 8) | l) as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use testbench::wire::frame::ones_add;

    /// Every pair of column sums the ten bytes can make: the folds agree with end-around-carry addition.
    #[test]
    fn fold_model_is_ones_complement_addition() {
        for lo in 0..=2550u32 {
            for hi in 0..=2550u32 {
                let v = lo + (hi << 8);
                let want = ones_add((v & 0xFFFF) as u16, (v >> 16) as u16);
                let got = fold_model(lo, hi);
                // 0x0000 and 0xFFFF are both zero; the sum of non-zero words is never 0x0000
                assert!(got == want || (v != 0 && got == 0xFFFF && want == 0), "{lo} {hi}: {got:#x} vs {want:#x}");
            }
        }
    }

    #[test]
    fn ten_words_a_cycle_against_the_software_sum() {
        let mut u = Csum10::default();
        u.connect_all();
        let mut rng = SmallRng::seed_from_u64(5);
        let mut want = std::collections::VecDeque::new();
        for t in 0..3000 {
            let ws: [u16; 10] = std::array::from_fn(|i| match t % 4 {
                0 => 0xFFFF,
                1 if i % 3 == 0 => 0,
                _ => rng.gen(),
            });
            for (i, w) in ws.iter().enumerate() {
                u.w[i].next = bits(u64::from(*w));
            }
            let s = ws.iter().fold(0u16, |a, w| ones_add(a, *w));
            want.push_back(if s == 0 && ws.iter().any(|w| *w != 0) { 0xFFFF } else { s });
            u.clock.next = false.into();
            assert!(simulate(&mut u, 50));
            if want.len() > CSUM10_LATENCY {
                let w = want.pop_front().unwrap();
                assert_eq!(u.sum.val().to_u64() as u16, w, "cycle {t}");
            }
            u.clock.next = true.into();
            assert!(simulate(&mut u, 50));
        }
    }
}
