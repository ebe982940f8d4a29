//! Byte map: each output byte is a constant or one byte of the input vector (pure wiring).
//!
//! Header formers are built from it: the map is a table (output byte ← constant, or input bits
//! `[off, off+8)`) computed from the golden wire model's layout, so no field offset is typed into the logic.
//! Written by hand like [`crate::common::gf2::Gf2Map`]: the Rust model and the Verilog come from the same table, and
//! the Verilator equivalence tests compare them.

use rust_hdl::prelude::*;

/// Where one output byte comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteSrc {
    Const(u8),
    /// Input bits `[off, off + 8)`, bit `off` becoming the byte's bit 0.
    In(usize),
}

/// `y[8i+7:8i] = src[i]` for `i < OUT/8`.
#[derive(LogicBlock)]
pub struct ByteMap<const IN: usize, const OUT: usize> {
    pub x: Signal<In, Bits<IN>>,
    pub y: Signal<Out, Bits<OUT>>,
    _src: Vec<ByteSrc>,
}

impl<const IN: usize, const OUT: usize> ByteMap<IN, OUT> {
    pub fn new(src: Vec<ByteSrc>) -> Self {
        assert!(OUT % 8 == 0 && src.len() == OUT / 8, "one source per output byte");
        assert!(src.iter().all(|s| match s {
            ByteSrc::In(off) => off + 8 <= IN,
            ByteSrc::Const(_) => true,
        }));
        Self { x: Default::default(), y: Default::default(), _src: src }
    }
}

impl<const IN: usize, const OUT: usize> Logic for ByteMap<IN, OUT> {
    fn update(&mut self) {
        let x = self.x.val();
        let mut y = Bits::<OUT>::default();
        for (i, s) in self._src.iter().enumerate() {
            let b = match *s {
                ByteSrc::Const(c) => bits::<8>(c as u64),
                ByteSrc::In(off) => x.get_bits::<8>(off),
            };
            y.set_bits::<8>(8 * i, b);
        }
        self.y.next = y;
    }

    fn connect(&mut self) {
        self.y.connect();
    }

    fn hdl(&self) -> Verilog {
        let mut v = String::from("always @(*) begin\n");
        for (i, s) in self._src.iter().enumerate() {
            match s {
                ByteSrc::Const(c) => v.push_str(&format!("   y[{}:{}] = 8'h{c:02x};\n", 8 * i + 7, 8 * i)),
                ByteSrc::In(off) => v.push_str(&format!("   y[{}:{}] = x[{}:{}];\n", 8 * i + 7, 8 * i, off + 7, off)),
            }
        }
        v.push_str("end\n");
        Verilog::Custom(v)
    }
}

/// A 64-bit value's bytes reversed (host order to wire order).
pub fn swap64_map() -> ByteMap<64, 64> {
    ByteMap::new((0..8).map(|j| ByteSrc::In(8 * (7 - j))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_come_from_their_sources() {
        let mut m = ByteMap::<16, 32>::new(vec![ByteSrc::In(8), ByteSrc::Const(0xA5), ByteSrc::In(0), ByteSrc::In(4)]);
        m.connect_all();
        m.x.next = bits::<16>(0x1234);
        assert!(simulate(&mut m, 10));
        assert_eq!(m.y.val().to_u32(), 0x23_34_A5_12);
        let v = generate_verilog(&m);
        assert!(v.contains("y[15:8] = 8'ha5;") && v.contains("y[7:0] = x[15:8];"));
        yosys_validate("bytemap", &v).unwrap();
    }
}
