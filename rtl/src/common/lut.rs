//! Lookup table: `y = table[x]` for an 8-bit `x`, a constant table (a `case` in Verilog, a ROM in LUTs).
//! Hand-written like [`crate::common::gf2::Gf2Map`]; the table comes from the golden model (e.g. the opcode table).

use rust_hdl::prelude::*;

#[derive(LogicBlock)]
pub struct Lut8<const OUT: usize> {
    pub x: Signal<In, Bits<8>>,
    pub y: Signal<Out, Bits<OUT>>,
    _table: Vec<u64>,
}

impl<const OUT: usize> Lut8<OUT> {
    /// `table[i]` for i in 0..256 (missing entries are 0).
    pub fn new(mut table: Vec<u64>) -> Self {
        assert!(OUT <= 64 && table.len() <= 256);
        table.resize(256, 0);
        assert!(OUT == 64 || table.iter().all(|v| v >> OUT == 0), "table value wider than the output");
        Self { x: Default::default(), y: Default::default(), _table: table }
    }
}

impl<const OUT: usize> Logic for Lut8<OUT> {
    fn update(&mut self) {
        self.y.next = bits::<OUT>(self._table[self.x.val().index()]);
    }

    fn connect(&mut self) {
        self.y.connect();
    }

    fn hdl(&self) -> Verilog {
        let mut v = String::from("always @(*) begin\n   case (x)\n");
        for (i, t) in self._table.iter().enumerate() {
            if *t != 0 {
                v.push_str(&format!("      8'h{i:02x}: y = {OUT}'h{t:x};\n"));
            }
        }
        v.push_str(&format!("      default: y = {OUT}'h0;\n   endcase\nend\n"));
        Verilog::Custom(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_up_every_entry() {
        let table: Vec<u64> = (0..256u64).map(|i| (i * 7) & 0x3F).collect();
        let mut l = Lut8::<6>::new(table.clone());
        l.connect_all();
        for i in 0..256u64 {
            l.x.next = bits::<8>(i);
            assert!(simulate(&mut l, 10));
            assert_eq!(l.y.val().to_u64(), table[i as usize]);
        }
        yosys_validate("lut8", &generate_verilog(&l)).unwrap();
    }
}
