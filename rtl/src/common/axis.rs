//! AXI4-Stream bundles of the 512-bit datapath.
//!
//! Byte 0 of a beat (the first byte on the wire) is `tdata[7:0]`; `tkeep[i]` marks byte i valid. Every beat
//! but the last of a frame is full; the last has a contiguous `tkeep` from bit 0 (1..=64 bytes).

use rust_hdl::prelude::*;

/// Bytes per beat of the datapath.
pub const BEAT_BYTES: usize = 64;

/// The sending side of a 512-bit AXI4-Stream (`m_axis`).
#[derive(LogicInterface, Default)]
#[join = "AxisSink"]
pub struct AxisSource {
    pub tdata: Signal<Out, Bits<512>>,
    pub tkeep: Signal<Out, Bits<64>>,
    pub tlast: Signal<Out, Bit>,
    pub tvalid: Signal<Out, Bit>,
    pub tready: Signal<In, Bit>,
}

/// The receiving side of a 512-bit AXI4-Stream (`s_axis`).
#[derive(LogicInterface, Default)]
#[join = "AxisSource"]
pub struct AxisSink {
    pub tdata: Signal<In, Bits<512>>,
    pub tkeep: Signal<In, Bits<64>>,
    pub tlast: Signal<In, Bit>,
    pub tvalid: Signal<In, Bit>,
    pub tready: Signal<Out, Bit>,
}

/// Pack up to 64 bytes into a beat (byte 0 in bits 7:0) and its `tkeep`.
pub fn beat_of(bytes: &[u8]) -> (Bits<512>, Bits<64>) {
    assert!(bytes.len() <= BEAT_BYTES);
    let mut data = Bits::<512>::default();
    for (i, chunk) in bytes.chunks(4).enumerate() {
        let mut w = 0u64;
        for (j, b) in chunk.iter().enumerate() {
            w |= (*b as u64) << (8 * j);
        }
        data.set_bits::<32>(32 * i, bits::<32>(w));
    }
    let keep = if bytes.len() == 64 {
        u64::MAX
    } else {
        (1u64 << bytes.len()) - 1
    };
    (data, keep_bits(keep))
}

/// The bytes of a beat (the inverse of [`beat_of`]); panics unless `tkeep` is contiguous from lane 0, as
/// every stream of the design keeps it.
pub fn bytes_of_beat(data: Bits<512>, keep: Bits<64>) -> Vec<u8> {
    let k = keep.to_u64();
    assert!(k != 0 && k & k.wrapping_add(1) == 0, "tkeep {k:#x} not contiguous from lane 0");
    (0..k.count_ones() as usize).map(|j| data.get_bits::<8>(8 * j).to_u64() as u8).collect()
}

/// A 64-bit `tkeep` value as `Bits<64>`.
pub fn keep_bits(keep: u64) -> Bits<64> {
    let mut k = Bits::<64>::default();
    k.set_bits::<32>(0, bits::<32>(keep & 0xFFFF_FFFF));
    k.set_bits::<32>(32, bits::<32>(keep >> 32));
    k
}

/// The 16 little-endian 32-bit words of a 64-byte beat (zero-filled past the end), as the Verilator
/// model takes a 512-bit port.
pub fn beat_words(bytes: &[u8]) -> [u32; 16] {
    let mut w = [0u32; 16];
    for (i, b) in bytes.iter().enumerate().take(BEAT_BYTES) {
        w[i / 4] |= (*b as u32) << (8 * (i % 4));
    }
    w
}

/// `tkeep` expanded to a byte mask over `tdata` (pure wiring: byte i of `y` is eight copies of `keep[i]`).
/// Hand-written leaf, as rust-hdl's `#[hdl_gen]` has no bit replication.
#[derive(LogicBlock, Default)]
pub struct KeepMask {
    pub keep: Signal<In, Bits<64>>,
    pub mask: Signal<Out, Bits<512>>,
}

impl Logic for KeepMask {
    fn update(&mut self) {
        let k = self.keep.val();
        let mut m = Bits::<512>::default();
        for i in 0..64 {
            if k.get_bit(i) {
                m.set_bits::<8>(8 * i, bits::<8>(0xFF));
            }
        }
        self.mask.next = m;
    }

    fn connect(&mut self) {
        self.mask.connect();
    }

    fn hdl(&self) -> Verilog {
        let mut v = String::from("always @(*) begin\n");
        for i in 0..64 {
            v.push_str(&format!("   mask[{}:{}] = {{8{{keep[{i}]}}}};\n", 8 * i + 7, 8 * i));
        }
        v.push_str("end\n");
        Verilog::Custom(v)
    }
}
