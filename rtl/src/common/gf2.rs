//! GF(2)-linear map: each output bit is the XOR (parity) of a constant set of input bits.
//!
//! The CRC engines are built from these: a CRC over a fixed number of bytes is a linear map, and so is a
//! fixed rewiring (a bit copied from one place to several). rust-hdl's `#[hdl_gen]` has no per-bit
//! assignment that survives Verilog generation, so this leaf is written by hand: the Rust model and the
//! Verilog are produced from the same row masks, and the Verilator equivalence tests compare them.

use rust_hdl::prelude::*;

/// `y[r] = ^(x & row[r])` for `r < OUT`; `IN <= 64`, `OUT <= 64`.
#[derive(LogicBlock)]
pub struct Gf2Map<const IN: usize, const OUT: usize> {
    pub x: Signal<In, Bits<IN>>,
    pub y: Signal<Out, Bits<OUT>>,
    _rows: Vec<u64>,
}

impl<const IN: usize, const OUT: usize> Gf2Map<IN, OUT> {
    /// `rows[r]` selects the input bits feeding output bit r.
    pub fn new(rows: Vec<u64>) -> Self {
        assert!(IN <= 64 && OUT <= 64 && rows.len() == OUT);
        let in_mask = if IN == 64 { u64::MAX } else { (1u64 << IN) - 1 };
        assert!(rows.iter().all(|r| r & !in_mask == 0), "row selects a bit past the input width");
        Self { x: Default::default(), y: Default::default(), _rows: rows }
    }

    /// Software model of the map.
    pub fn apply(rows: &[u64], x: u64) -> u64 {
        rows.iter().enumerate().fold(0, |y, (r, m)| y | (((m & x).count_ones() as u64) & 1) << r)
    }
}

impl<const IN: usize, const OUT: usize> Logic for Gf2Map<IN, OUT> {
    fn update(&mut self) {
        let x = self.x.val().to_u64();
        self.y.next = bits::<OUT>(Self::apply(&self._rows, x));
    }

    fn connect(&mut self) {
        self.y.connect();
    }

    fn hdl(&self) -> Verilog {
        let terms: Vec<String> = self
            ._rows
            .iter()
            .enumerate()
            .rev()
            .map(|(r, m)| {
                if *m == 0 {
                    "1'b0".to_string()
                } else {
                    format!("^(x & {IN}'h{m:x}) /* y[{r}] */")
                }
            })
            .collect();
        Verilog::Custom(format!("always @(*) begin\n   y = {{\n      {}\n   }};\nend\n", terms.join(",\n      ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parity_of_selected_bits() {
        let rows = vec![0b1011, 0b0100, 0, 0b1111];
        let mut m = Gf2Map::<4, 4>::new(rows.clone());
        m.connect_all();
        for x in 0..16u64 {
            m.x.next = bits::<4>(x);
            assert!(simulate(&mut m, 10));
            let y = m.y.val().to_u64();
            for (r, row) in rows.iter().enumerate() {
                assert_eq!(y >> r & 1, ((row & x).count_ones() & 1) as u64, "x={x:04b} r={r}");
            }
        }
        let v = generate_verilog(&m);
        assert!(v.contains("^(x & 4'hb) /* y[0] */"));
        yosys_validate("gf2map", &v).unwrap();
    }
}
