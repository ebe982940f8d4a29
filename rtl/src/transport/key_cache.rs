//! Key Cache: the memory-region table of the RNIC and its lkey/rkey checks, as Linux rxe does them.
//!
//! **Table.** `N` entries (`N <= 2^AW`) in block RAM ([`SdpRam`], a `reg mem[]` with a registered read, so
//! Yosys/Vivado infer BRAM). An entry ([`MrEntry`]) holds the 8-bit key tag, the PD number, the access flags
//! (bit meanings of `testbench::model::mr::AccessFlags`: LOCAL_WRITE 1, REMOTE_WRITE 2, REMOTE_READ 4,
//! REMOTE_ATOMIC 8), the MR virtual address, its length and the host (DMA) base address; the translation is
//! contiguous: `dma = base + (va - mr.va)`, and whether it is a fast-registration MR (`fast`, the golden
//! model's `MrKind::FastReg`). The valid bit lives in a 1-bit RAM of its own so that an invalidate touches
//! nothing else. Keys are `index << 8 | tag` (rxe `rxe_mr_init`; lkey = rkey).
//!
//! **Write port** (driver): `wr_en` writes the entry at `wr_index` (valid, tag, PD, access, va, len, base);
//! `inv_en` clears the valid bit of `wr_index` (rxe `rxe_invalidate_mr` sets `RXE_MR_STATE_FREE`; checking the
//! key of an invalidate is the caller's job) and wins over `wr_valid` when both are high. A write or invalidate
//! takes effect for lookups presented in the *next* cycle or later; a lookup presented in the same cycle as a
//! write to its index sees the old entry (read-before-write).
//!
//! **Lookup port**: valid-only (no backpressure), one lookup per cycle, fixed latency [`LATENCY`] = 8: the
//! result of a lookup presented with `lk_valid` in cycle t is on `res_*` (with `res_valid`) after the 8th rising
//! edge. Inputs: `lk_key`, `lk_pd`, `lk_va`, `lk_len` (32 bits: the RETH DMA length and an SGE length are 32-bit),
//! `lk_access` (required flags, a mask) and `lk_remote` (rkey vs lkey check). Outputs: `res_ok`, `res_err`
//! ([`KcErr`]), `res_dma` (meaningful when `res_ok` and `lk_len != 0`), and `res_inv`: may the key be
//! invalidated by a SEND_WITH_INV of PD `lk_pd` (rxe `rxe_invalidate_mr`: the index exists, the tag matches,
//! the entry is a fast-registration MR; the golden model adds the PD; the valid bit, access and range play no
//! part, so an invalid entry may be invalidated again as rxe allows).
//!
//! **Rules** (rxe, drivers/infiniband/sw/rxe):
//! - `rxe_mr.c lookup_mr`: the MR at `key >> 8` must exist (`rxe_pool_get_index`), its key must equal the key
//!   (tag compare), its PD must be the PD, `(access & mr->access) == access`, and the state must be VALID.
//!   rxe fails all of these alike (NULL); our code is a diagnostic in the golden model's order
//!   (`testbench::model::mr::MrTable::check`): bad index (>= N) or tag mismatch = [`KcErr::Key`], then invalid
//!   entry, PD, access.
//! - `rxe_mr.c mr_check_range`: `iova >= mr.iova` and `iova + length <= mr.iova + mr.length`; here the sums are
//!   exact (65 bits): a `va + len` that overflows 64 bits fails ([`KcErr::Bounds`]), as in the golden model's
//!   `checked_add`.
//! - Zero length: rxe does no key check at all for a zero-length access (`rxe_resp.c check_rkey`: "A zero-byte
//!   read or write op is not required to set an addr or rkey. See C9-88"; `rxe_mr.c copy_data` returns before
//!   `lookup_mr` when `length == 0` and skips zero-length SGEs). So `lk_len == 0` gives `res_ok` = 1 and
//!   `res_err` = 0 whatever the key, PD and access.
//! - `lk_remote`: an MR's lkey and rkey are the same (rxe `rxe_mr_init` sets `lkey = rkey = index << 8 | tag`,
//!   and so does the golden model), so for an MR the remote checks differ from local ones only by the access
//!   mask the caller gives. A memory window's entry (`mw`, type 1, written by the driver's bind) answers an
//!   rkey lookup only: as an lkey it is a [`KcErr::Key`] (rxe looks an lkey up in its MR pool, where no window
//!   is). Its range is the window's, not its MR's (IBA; rxe 6.1 checks the MR's, `docs/rxe-rules.md` 5b).
//!
//! **Timing** (322 MHz, <= 6 LUT6 levels): every 64-bit sum or compare goes through [`PipeAdd64`] (8-bit
//! slices, registered slice carries, a lookahead stage and an increment stage). Stages: S1 input register and
//! BRAM read; S1 key/PD/access checks and the carry-save form of `va - mr.va + base`; S1..S4 `va + len`,
//! `mr.va + mr.len`, `va - mr.va` (borrow); S4..S7 `mr_end - end` (borrow); S2..S5 the DMA address; S8 output.

use crate::common::fifo::SdpRam;
use rust_hdl::prelude::*;
use testbench::model::mr::AccessFlags;

/// Lookup latency in cycles (input cycle to result).
pub const LATENCY: usize = 8;
/// Width of the PD number.
pub const PD_BITS: usize = 24;

/// `res_err` codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum KcErr {
    Ok = 0,
    /// Key index >= N, or the key's tag differs from the entry's (golden `KeyError::NoSuchKey`).
    Key = 1,
    /// Entry not valid (never written, or invalidated) (golden `KeyError::Invalid`).
    Invalid = 2,
    /// PD mismatch (golden `KeyError::WrongPd`).
    Pd = 3,
    /// A required access flag is missing (golden `KeyError::Access`).
    Access = 4,
    /// Out of the region, or `va + len` overflows (golden `KeyError::Bounds`).
    Bounds = 5,
}

impl KcErr {
    pub fn from_code(c: u64) -> Option<KcErr> {
        [KcErr::Ok, KcErr::Key, KcErr::Invalid, KcErr::Pd, KcErr::Access, KcErr::Bounds].get(c as usize).copied()
    }
}

/// Access flag bits as the table stores them (from the golden model).
pub const ACC_LOCAL_WRITE: u64 = AccessFlags::LOCAL_WRITE.0 as u64;
pub const ACC_REMOTE_WRITE: u64 = AccessFlags::REMOTE_WRITE.0 as u64;
pub const ACC_REMOTE_READ: u64 = AccessFlags::REMOTE_READ.0 as u64;
pub const ACC_REMOTE_ATOMIC: u64 = AccessFlags::REMOTE_ATOMIC.0 as u64;

/// One table entry (the valid bit is kept apart).
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct MrEntry {
    pub tag: Bits<8>,
    pub pd: Bits<PD_BITS>,
    pub access: Bits<4>,
    pub va: Bits<64>,
    pub len: Bits<64>,
    pub base: Bits<64>,
    /// A fast-registration MR (the golden model's `MrKind::FastReg`): the only kind a SEND_WITH_INV may
    /// invalidate (rxe `rxe_invalidate_mr`).
    pub fast: Bit,
    /// A bound memory window (type 1 or 2): its own range, access, PD and DMA base (its MR's translation at
    /// the window's address); an rkey only, never an lkey.
    pub mw: Bit,
    /// A type 2 window: usable only through the QP that bound it (`qpn`, QPN[7:0]); bound by a send WQE when
    /// it is not valid (rxe `RXE_MW_STATE_FREE`), and invalidated by LOCAL_INV / SEND_WITH_INV (`fast` set).
    pub mw2: Bit,
    pub qpn: Bits<8>,
    /// An MR registered with `IBV_ACCESS_MW_BIND`: windows may be bound over it.
    pub bind: Bit,
}

crate::logic_block! {
    /// Pipelined 64-bit adder: `sum = a + b' + cin` (mod 2^64) and `cout` its carry out, 3 cycles after the inputs,
    /// one new operation per cycle. `b' = b << 1` when built with [`PipeAdd64::shifted`] (the carry vector of a
    /// carry-save form), else `b`. Stage 1: eight 8-bit slice sums and slice propagates (a^b all ones); stage 2:
    /// slice carries by lookahead; stage 3: slice increments. Each stage is a few LUT6 levels.
    pub struct PipeAdd64 {
        pub clock: Signal<In, Clock>,
        pub a: Signal<In, Bits<64>>,
        pub b: Signal<In, Bits<64>>,
        pub cin: Signal<In, Bit>,
        pub sum: Signal<Out, Bits<64>>,
        pub cout: Signal<Out, Bit>,
        _shift: bool = false,
        _pipe: [(u64, bool); 2] = [(0, false); 2],
    }
}

impl PipeAdd64 {
    pub fn shifted() -> Self {
        Self { _shift: true, ..Default::default() }
    }
}

impl Logic for PipeAdd64 {
    fn update(&mut self) {
        if self.clock.pos_edge() {
            let a = self.a.val().to_u64() as u128;
            let mut b = self.b.val().to_u64();
            if self._shift {
                b <<= 1;
            }
            let s = a + b as u128 + self.cin.val() as u128;
            let (o, c) = self._pipe[1];
            self.sum.next = bits::<64>(o);
            self.cout.next = c;
            self._pipe[1] = self._pipe[0];
            self._pipe[0] = (s as u64, s >> 64 != 0);
        }
    }

    fn connect(&mut self) {
        self.sum.connect();
        self.cout.connect();
    }

    fn hdl(&self) -> Verilog {
        let mut v = String::new();
        v.push_str("wire [63:0] bb;\n");
        if self._shift {
            v.push_str("assign bb = {b[62:0], 1'b0};\n");
        } else {
            v.push_str("assign bb = b;\n");
        }
        for k in 0..8 {
            v.push_str(&format!("reg [8:0] s0_{k};\nreg p_{k};\nreg [7:0] ss_{k};\nreg cc_{k};\nwire c_{k};\n"));
        }
        v.push_str("wire c_8;\nreg cc_8;\n");
        v.push_str("assign c_0 = 1'b0;\nassign c_1 = s0_0[8];\n");
        for k in 1..8 {
            v.push_str(&format!("assign c_{} = s0_{k}[8] | (p_{k} & c_{k});\n", k + 1));
        }
        v.push_str("initial begin\n");
        for k in 0..8 {
            v.push_str(&format!("   s0_{k} = 9'd0;\n   p_{k} = 1'b0;\n   ss_{k} = 8'd0;\n   cc_{k} = 1'b0;\n"));
        }
        v.push_str("   cc_8 = 1'b0;\n   sum = 64'd0;\n   cout = 1'b0;\nend\n");
        v.push_str("always @(posedge clock) begin\n");
        for k in 0..8 {
            let (h, l) = (8 * k + 7, 8 * k);
            if k == 0 {
                v.push_str(&format!(
                    "   s0_0 <= {{1'b0, a[{h}:{l}]}} + {{1'b0, bb[{h}:{l}]}} + {{8'd0, cin}};\n"
                ));
            } else {
                v.push_str(&format!("   s0_{k} <= {{1'b0, a[{h}:{l}]}} + {{1'b0, bb[{h}:{l}]}};\n"));
            }
            v.push_str(&format!("   p_{k} <= &(a[{h}:{l}] ^ bb[{h}:{l}]);\n"));
            v.push_str(&format!("   ss_{k} <= s0_{k}[7:0];\n   cc_{k} <= c_{k};\n"));
            v.push_str(&format!("   sum[{h}:{l}] <= ss_{k} + {{7'd0, cc_{k}}};\n"));
        }
        v.push_str("   cc_8 <= c_8;\n   cout <= cc_8;\nend\n");
        Verilog::Custom(v)
    }
}

/// The Key Cache's write port as a bundle, as the command dispatcher drives it into the blocks that hold a
/// copy (WQE Check, the Responder): `en` writes entry `index` (an MR: valid, key tag, PD, access, VA range and
/// DMA base), `inv_en` invalidates it.
#[derive(LogicInterface, Default)]
#[join = "KcWriteSrc"]
pub struct KcWrite {
    pub en: Signal<In, Bit>,
    pub inv_en: Signal<In, Bit>,
    pub index: Signal<In, Bits<10>>,
    pub valid: Signal<In, Bit>,
    pub tag: Signal<In, Bits<8>>,
    pub pd: Signal<In, Bits<PD_BITS>>,
    pub access: Signal<In, Bits<4>>,
    pub va: Signal<In, Bits<64>>,
    pub len: Signal<In, Bits<64>>,
    pub base: Signal<In, Bits<64>>,
    pub fast: Signal<In, Bit>,
    pub mw: Signal<In, Bit>,
    pub mw2: Signal<In, Bit>,
    pub qpn: Signal<In, Bits<8>>,
    pub bind: Signal<In, Bit>,
}

/// The driving side of [`KcWrite`].
#[derive(LogicInterface, Default)]
#[join = "KcWrite"]
pub struct KcWriteSrc {
    pub en: Signal<Out, Bit>,
    pub inv_en: Signal<Out, Bit>,
    pub index: Signal<Out, Bits<10>>,
    pub valid: Signal<Out, Bit>,
    pub tag: Signal<Out, Bits<8>>,
    pub pd: Signal<Out, Bits<PD_BITS>>,
    pub access: Signal<Out, Bits<4>>,
    pub va: Signal<Out, Bits<64>>,
    pub len: Signal<Out, Bits<64>>,
    pub base: Signal<Out, Bits<64>>,
    pub fast: Signal<Out, Bit>,
    pub mw: Signal<Out, Bit>,
    pub mw2: Signal<Out, Bit>,
    pub qpn: Signal<Out, Bits<8>>,
    pub bind: Signal<Out, Bit>,
}

/// The Key Cache (see the module documentation). `N` entries, `N <= 2^AW`.
#[derive(LogicBlock)]
pub struct KeyCache<const N: usize, const AW: usize> {
    pub clock: Signal<In, Clock>,
    // write port
    pub wr_en: Signal<In, Bit>,
    pub inv_en: Signal<In, Bit>,
    pub wr_index: Signal<In, Bits<AW>>,
    pub wr_valid: Signal<In, Bit>,
    pub wr_tag: Signal<In, Bits<8>>,
    pub wr_pd: Signal<In, Bits<PD_BITS>>,
    pub wr_access: Signal<In, Bits<4>>,
    pub wr_va: Signal<In, Bits<64>>,
    pub wr_len: Signal<In, Bits<64>>,
    pub wr_base: Signal<In, Bits<64>>,
    pub wr_fast: Signal<In, Bit>,
    pub wr_mw: Signal<In, Bit>,
    pub wr_mw2: Signal<In, Bit>,
    pub wr_qpn: Signal<In, Bits<8>>,
    pub wr_bind: Signal<In, Bit>,
    // lookup port
    pub lk_valid: Signal<In, Bit>,
    pub lk_key: Signal<In, Bits<32>>,
    pub lk_pd: Signal<In, Bits<PD_BITS>>,
    pub lk_va: Signal<In, Bits<64>>,
    pub lk_len: Signal<In, Bits<32>>,
    pub lk_access: Signal<In, Bits<4>>,
    /// rkey (1) or lkey (0) check: a memory window's key is an rkey only (an lkey naming one is a key error).
    pub lk_remote: Signal<In, Bit>,
    /// The QP the lookup is for (QPN[7:0]): a type 2 window answers only the QP that bound it.
    pub lk_qpn: Signal<In, Bits<8>>,
    /// The MR must allow windows to be bound over it (MW_BIND), besides `lk_access`.
    pub lk_bind: Signal<In, Bit>,
    // result
    pub res_valid: Signal<Out, Bit>,
    pub res_ok: Signal<Out, Bit>,
    pub res_err: Signal<Out, Bits<3>>,
    pub res_dma: Signal<Out, Bits<64>>,
    /// The key may be invalidated by this PD (SEND_WITH_INV, rxe `rxe_invalidate_mr`): the index is in the
    /// table, the tag matches, the PD is the entry's and the entry is a fast-registration MR; the valid bit,
    /// the access flags and the range play no part.
    pub res_inv: Signal<Out, Bit>,
    /// A type 2 window of PD `lk_pd` may be bound at the key's index: the index is in the table, the entry is a
    /// type 2 window of that PD and not valid (rxe `RXE_MW_STATE_FREE`); the tag plays no part (the bind
    /// brings the window's next key).
    pub res_free: Signal<Out, Bit>,

    mrtab: SdpRam<MrEntry, AW>,
    valid_ram: SdpRam<Bit, AW>,
    // S1: the lookup, registered
    s1_v: DFF<Bit>,
    s1_key: DFF<Bits<32>>,
    s1_pd: DFF<Bits<PD_BITS>>,
    s1_va: DFF<Bits<64>>,
    s1_len: DFF<Bits<32>>,
    s1_need: DFF<Bits<4>>,
    s1_remote: DFF<Bit>,
    s1_qpn: DFF<Bits<8>>,
    s1_bind: DFF<Bit>,
    e1: Signal<Local, Bits<3>>,
    mr_va: Signal<Local, Bits<64>>,
    mr_nva: Signal<Local, Bits<64>>,
    mr_base: Signal<Local, Bits<64>>,
    // carry-save form of va + ~mr.va + base (+1 as the DMA adder's carry in)
    cs_sum: DFF<Bits<64>>,
    cs_carry: DFF<Bits<64>>,
    add_end: PipeAdd64,
    add_mrend: PipeAdd64,
    add_ge: PipeAdd64,
    add_le: PipeAdd64,
    add_dma: PipeAdd64,
    // S2..S7: valid, key-check error, zero length
    p_v: [DFF<Bit>; 6],
    p_err: [DFF<Bits<3>>; 6],
    p_zero: [DFF<Bit>; 6],
    p_inv: [DFF<Bit>; 6],
    inv1: Signal<Local, Bit>,
    p_free: [DFF<Bit>; 6],
    free1: Signal<Local, Bit>,
    r_free: DFF<Bit>,
    // S5..S7: overflow of va + len, bit 64 of mr.va + mr.len, va >= mr.va
    q_ovf: [DFF<Bit>; 3],
    q_bhi: [DFF<Bit>; 3],
    q_ge: [DFF<Bit>; 3],
    // S6..S7: the DMA address
    q_dma: [DFF<Bits<64>>; 2],
    bounds_ok: Signal<Local, Bit>,
    e7: Signal<Local, Bits<3>>,
    // S8: outputs
    r_v: DFF<Bit>,
    r_ok: DFF<Bit>,
    r_err: DFF<Bits<3>>,
    r_dma: DFF<Bits<64>>,
    r_inv: DFF<Bit>,

    n_entries: Constant<Bits<24>>,
    zero32: Constant<Bits<32>>,
    zero4: Constant<Bits<4>>,
    err_ok: Constant<Bits<3>>,
    err_key: Constant<Bits<3>>,
    err_invalid: Constant<Bits<3>>,
    err_pd: Constant<Bits<3>>,
    err_access: Constant<Bits<3>>,
    err_bounds: Constant<Bits<3>>,
}

impl<const N: usize, const AW: usize> Default for KeyCache<N, AW> {
    fn default() -> Self {
        assert!(N >= 1 && N <= 1 << AW && AW <= 24, "N entries must fit the AW-bit index and the 24-bit key index");
        let e = |c: KcErr| Constant::new(bits::<3>(c as u64));
        Self {
            clock: Default::default(),
            wr_en: Default::default(),
            inv_en: Default::default(),
            wr_index: Default::default(),
            wr_valid: Default::default(),
            wr_tag: Default::default(),
            wr_pd: Default::default(),
            wr_access: Default::default(),
            wr_va: Default::default(),
            wr_len: Default::default(),
            wr_base: Default::default(),
            wr_fast: Default::default(),
            wr_mw: Default::default(),
            wr_mw2: Default::default(),
            wr_qpn: Default::default(),
            wr_bind: Default::default(),
            lk_qpn: Default::default(),
            lk_bind: Default::default(),
            res_free: Default::default(),
            s1_qpn: Default::default(),
            s1_bind: Default::default(),
            p_free: Default::default(),
            free1: Default::default(),
            r_free: Default::default(),
            lk_valid: Default::default(),
            lk_key: Default::default(),
            lk_pd: Default::default(),
            lk_va: Default::default(),
            lk_len: Default::default(),
            lk_access: Default::default(),
            lk_remote: Default::default(),
            res_valid: Default::default(),
            res_ok: Default::default(),
            res_err: Default::default(),
            res_dma: Default::default(),
            res_inv: Default::default(),
            mrtab: Default::default(),
            valid_ram: Default::default(),
            s1_v: Default::default(),
            s1_key: Default::default(),
            s1_pd: Default::default(),
            s1_va: Default::default(),
            s1_len: Default::default(),
            s1_need: Default::default(),
            s1_remote: Default::default(),
            e1: Default::default(),
            mr_va: Default::default(),
            mr_nva: Default::default(),
            mr_base: Default::default(),
            cs_sum: Default::default(),
            cs_carry: Default::default(),
            add_end: Default::default(),
            add_mrend: Default::default(),
            add_ge: Default::default(),
            add_le: Default::default(),
            add_dma: PipeAdd64::shifted(),
            p_v: Default::default(),
            p_err: Default::default(),
            p_zero: Default::default(),
            p_inv: Default::default(),
            inv1: Default::default(),
            q_ovf: Default::default(),
            q_bhi: Default::default(),
            q_ge: Default::default(),
            q_dma: Default::default(),
            bounds_ok: Default::default(),
            e7: Default::default(),
            r_v: Default::default(),
            r_ok: Default::default(),
            r_err: Default::default(),
            r_dma: Default::default(),
            r_inv: Default::default(),
            n_entries: Constant::new(bits::<24>(N as u64)),
            zero32: Constant::new(bits::<32>(0)),
            zero4: Constant::new(bits::<4>(0)),
            err_ok: e(KcErr::Ok),
            err_key: e(KcErr::Key),
            err_invalid: e(KcErr::Invalid),
            err_pd: e(KcErr::Pd),
            err_access: e(KcErr::Access),
            err_bounds: e(KcErr::Bounds),
        }
    }
}

impl<const N: usize, const AW: usize> Logic for KeyCache<N, AW> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, s1_v, s1_key, s1_pd, s1_va, s1_len, s1_need, s1_remote, s1_qpn, s1_bind, cs_sum, cs_carry, r_v, r_ok, r_err, r_dma, r_inv, r_free);
        clock!(self, clock, mrtab, valid_ram, add_end, add_mrend, add_ge, add_le, add_dma);
        for i in 0..6 {
            self.p_v[i].clock.next = self.clock.val();
            self.p_v[i].d.next = self.p_v[i].q.val();
            self.p_err[i].clock.next = self.clock.val();
            self.p_err[i].d.next = self.p_err[i].q.val();
            self.p_zero[i].clock.next = self.clock.val();
            self.p_zero[i].d.next = self.p_zero[i].q.val();
            self.p_inv[i].clock.next = self.clock.val();
            self.p_inv[i].d.next = self.p_inv[i].q.val();
            self.p_free[i].clock.next = self.clock.val();
            self.p_free[i].d.next = self.p_free[i].q.val();
        }
        for i in 0..3 {
            self.q_ovf[i].clock.next = self.clock.val();
            self.q_ovf[i].d.next = self.q_ovf[i].q.val();
            self.q_bhi[i].clock.next = self.clock.val();
            self.q_bhi[i].d.next = self.q_bhi[i].q.val();
            self.q_ge[i].clock.next = self.clock.val();
            self.q_ge[i].d.next = self.q_ge[i].q.val();
        }
        for i in 0..2 {
            self.q_dma[i].clock.next = self.clock.val();
            self.q_dma[i].d.next = self.q_dma[i].q.val();
        }

        // Table write port; an invalidate clears the valid bit only.
        self.mrtab.waddr.next = self.wr_index.val();
        self.mrtab.we.next = self.wr_en.val();
        self.mrtab.wdata.next.tag = self.wr_tag.val();
        self.mrtab.wdata.next.pd = self.wr_pd.val();
        self.mrtab.wdata.next.access = self.wr_access.val();
        self.mrtab.wdata.next.va = self.wr_va.val();
        self.mrtab.wdata.next.len = self.wr_len.val();
        self.mrtab.wdata.next.base = self.wr_base.val();
        self.mrtab.wdata.next.fast = self.wr_fast.val();
        self.mrtab.wdata.next.mw = self.wr_mw.val();
        self.mrtab.wdata.next.mw2 = self.wr_mw2.val();
        self.mrtab.wdata.next.qpn = self.wr_qpn.val();
        self.mrtab.wdata.next.bind = self.wr_bind.val();
        self.valid_ram.waddr.next = self.wr_index.val();
        self.valid_ram.we.next = self.wr_en.val() | self.inv_en.val();
        self.valid_ram.wdata.next = self.wr_valid.val() & !self.inv_en.val();

        // Cycle 0: the table read starts from the port; the lookup is registered (S1).
        self.mrtab.raddr.next = self.lk_key.val().get_bits::<AW>(8);
        self.valid_ram.raddr.next = self.lk_key.val().get_bits::<AW>(8);
        self.s1_v.d.next = self.lk_valid.val();
        self.s1_key.d.next = self.lk_key.val();
        self.s1_pd.d.next = self.lk_pd.val();
        self.s1_va.d.next = self.lk_va.val();
        self.s1_len.d.next = self.lk_len.val();
        self.s1_need.d.next = self.lk_access.val();
        self.s1_remote.d.next = self.lk_remote.val();
        self.s1_qpn.d.next = self.lk_qpn.val();
        self.s1_bind.d.next = self.lk_bind.val();

        // S1: lookup_mr's checks, in the golden model's order.
        self.e1.next = self.err_ok.val();
        if (self.s1_key.q.val().get_bits::<24>(8) >= self.n_entries.val())
            | (self.s1_key.q.val().get_bits::<8>(0) != self.mrtab.rdata.val().tag)
            | (self.mrtab.rdata.val().mw & !self.s1_remote.q.val())
            | (self.mrtab.rdata.val().mw2 & (self.mrtab.rdata.val().qpn != self.s1_qpn.q.val()))
        {
            self.e1.next = self.err_key.val();
        } else if !self.valid_ram.rdata.val() {
            self.e1.next = self.err_invalid.val();
        } else if self.s1_pd.q.val() != self.mrtab.rdata.val().pd {
            self.e1.next = self.err_pd.val();
        } else if ((self.s1_need.q.val() & !self.mrtab.rdata.val().access) != self.zero4.val())
            | (self.s1_bind.q.val() & !self.mrtab.rdata.val().bind)
        {
            self.e1.next = self.err_access.val();
        }
        // rxe_invalidate_mr's checks (with the PD the golden model adds): key, PD, fast-registration kind
        self.inv1.next = (self.s1_key.q.val().get_bits::<24>(8) < self.n_entries.val())
            & (self.s1_key.q.val().get_bits::<8>(0) == self.mrtab.rdata.val().tag)
            & (self.s1_pd.q.val() == self.mrtab.rdata.val().pd)
            & self.mrtab.rdata.val().fast;
        self.p_inv[0].d.next = self.inv1.val();
        // a type 2 window that may be bound: index, type, PD, not valid (no tag: the bind brings the next key)
        self.free1.next = (self.s1_key.q.val().get_bits::<24>(8) < self.n_entries.val())
            & self.mrtab.rdata.val().mw2
            & !self.valid_ram.rdata.val()
            & (self.s1_pd.q.val() == self.mrtab.rdata.val().pd);
        self.p_free[0].d.next = self.free1.val();
        self.p_v[0].d.next = self.s1_v.q.val();
        self.p_err[0].d.next = self.e1.val();
        self.p_zero[0].d.next = self.s1_len.q.val() == self.zero32.val();
        for i in 0..5 {
            self.p_v[i + 1].d.next = self.p_v[i].q.val();
            self.p_err[i + 1].d.next = self.p_err[i].q.val();
            self.p_zero[i + 1].d.next = self.p_zero[i].q.val();
            self.p_inv[i + 1].d.next = self.p_inv[i].q.val();
            self.p_free[i + 1].d.next = self.p_free[i].q.val();
        }

        // S1..S4: end = va + len, mr_end = mr.va + mr.len, va - mr.va (carry = no borrow = va >= mr.va).
        self.mr_va.next = self.mrtab.rdata.val().va;
        self.mr_nva.next = !self.mr_va.val();
        self.mr_base.next = self.mrtab.rdata.val().base;
        self.add_end.a.next = self.s1_va.q.val();
        self.add_end.b.next = bit_cast::<64, 32>(self.s1_len.q.val());
        self.add_end.cin.next = false;
        self.add_mrend.a.next = self.mr_va.val();
        self.add_mrend.b.next = self.mrtab.rdata.val().len;
        self.add_mrend.cin.next = false;
        self.add_ge.a.next = self.s1_va.q.val();
        self.add_ge.b.next = self.mr_nva.val();
        self.add_ge.cin.next = true;
        // S1: carry-save va + ~mr.va + base; S2..S5: dma = that + 1.
        self.cs_sum.d.next = self.s1_va.q.val() ^ self.mr_nva.val() ^ self.mr_base.val();
        self.cs_carry.d.next = (self.s1_va.q.val() & self.mr_nva.val())
            | (self.s1_va.q.val() & self.mr_base.val())
            | (self.mr_nva.val() & self.mr_base.val());
        self.add_dma.a.next = self.cs_sum.q.val();
        self.add_dma.b.next = self.cs_carry.q.val();
        self.add_dma.cin.next = true;

        // S4..S7: mr_end[63:0] - end[63:0] (carry = mr_end[63:0] >= end[63:0]).
        self.add_le.a.next = self.add_mrend.sum.val();
        self.add_le.b.next = !self.add_end.sum.val();
        self.add_le.cin.next = true;
        self.q_ovf[0].d.next = self.add_end.cout.val();
        self.q_bhi[0].d.next = self.add_mrend.cout.val();
        self.q_ge[0].d.next = self.add_ge.cout.val();
        self.q_dma[0].d.next = self.add_dma.sum.val();
        for i in 0..2 {
            self.q_ovf[i + 1].d.next = self.q_ovf[i].q.val();
            self.q_bhi[i + 1].d.next = self.q_bhi[i].q.val();
            self.q_ge[i + 1].d.next = self.q_ge[i].q.val();
        }
        self.q_dma[1].d.next = self.q_dma[0].q.val();

        // S7: mr_check_range: va >= mr.va, no overflow of va + len, va + len <= mr.va + mr.len (65 bits).
        self.bounds_ok.next =
            self.q_ge[2].q.val() & !self.q_ovf[2].q.val() & (self.q_bhi[2].q.val() | self.add_le.cout.val());
        self.e7.next = self.p_err[5].q.val();
        if self.p_zero[5].q.val() {
            self.e7.next = self.err_ok.val();
        } else if (self.p_err[5].q.val() == self.err_ok.val()) & !self.bounds_ok.val() {
            self.e7.next = self.err_bounds.val();
        }
        self.r_v.d.next = self.p_v[5].q.val();
        self.r_err.d.next = self.e7.val();
        self.r_ok.d.next = self.e7.val() == self.err_ok.val();
        self.r_dma.d.next = self.q_dma[1].q.val();
        self.r_inv.d.next = self.p_inv[5].q.val();
        self.r_free.d.next = self.p_free[5].q.val();

        self.res_valid.next = self.r_v.q.val();
        self.res_ok.next = self.r_ok.q.val();
        self.res_err.next = self.r_err.q.val();
        self.res_dma.next = self.r_dma.q.val();
        self.res_inv.next = self.r_inv.q.val();
        self.res_free.next = self.r_free.q.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    #[derive(Clone, Copy, Default)]
    struct E {
        valid: bool,
        tag: u8,
        pd: u32,
        acc: u8,
        va: u64,
        len: u64,
        base: u64,
        fast: bool,
        mw: bool,
        mw2: bool,
        qpn: u8,
        bind: bool,
    }

    /// rxe `rxe_invalidate_mr` with the golden model's PD check: the key names a fast-registration MR of `pd`.
    fn may_invalidate(t: &[E], n: usize, key: u32, pd: u32) -> bool {
        let i = (key >> 8) as usize;
        i < n && t[i].tag == key as u8 && t[i].pd == pd && t[i].fast
    }

    /// rxe lookup_mr + mr_check_range, zero length passes (see the module docs).
    /// A type 2 window of `pd` at the key's index that may be bound (not valid; the tag plays no part).
    fn may_bind(t: &[E], n: usize, key: u32, pd: u32) -> bool {
        let i = (key >> 8) as usize;
        i < n && t[i].mw2 && !t[i].valid && t[i].pd == pd
    }

    #[allow(clippy::too_many_arguments)]
    fn check(t: &[E], n: usize, key: u32, pd: u32, va: u64, len: u32, need: u8, remote: bool, qpn: u8, bind: bool) -> (KcErr, u64) {
        if len == 0 {
            return (KcErr::Ok, 0);
        }
        let i = (key >> 8) as usize;
        if i >= n || t[i].tag != key as u8 || (t[i].mw && !remote) || (t[i].mw2 && t[i].qpn != qpn) {
            return (KcErr::Key, 0);
        }
        let e = t[i];
        if !e.valid {
            return (KcErr::Invalid, 0);
        }
        if e.pd != pd {
            return (KcErr::Pd, 0);
        }
        if need & !e.acc != 0 || (bind && !e.bind) {
            return (KcErr::Access, 0);
        }
        let end = va as u128 + len as u128;
        if va < e.va || end > e.va as u128 + e.len as u128 || end > u64::MAX as u128 {
            return (KcErr::Bounds, 0);
        }
        (KcErr::Ok, e.base.wrapping_add(va - e.va))
    }

    #[test]
    fn key_cache_matches_rxe_rules_in_rust_hdl() {
        const N: usize = 12;
        let mut kc = Box::<KeyCache<N, 4>>::default();
        kc.connect_all();
        let mut t = [E::default(); 16];
        let mut rng = SmallRng::seed_from_u64(7);
        let mut pending: std::collections::VecDeque<Option<(KcErr, u64, u32, bool, bool)>> = Default::default();
        let mut checked = 0;
        for cycle in 0..3000 {
            // driver
            let wr = rng.gen_ratio(1, 6);
            let inv = !wr && rng.gen_ratio(1, 30);
            let wi = rng.gen_range(0..16usize);
            let mut ne = E {
                valid: rng.gen_ratio(9, 10),
                tag: rng.gen_range(0..4),
                pd: rng.gen_range(0..3),
                acc: rng.gen_range(0..16),
                va: if rng.gen() { rng.gen() } else { rng.gen_range(0..1 << 20) },
                len: rng.gen_range(0..1 << 16),
                base: rng.gen(),
                fast: rng.gen(),
                mw: rng.gen_ratio(1, 4),
                mw2: rng.gen_ratio(1, 4),
                qpn: rng.gen_range(0..3),
                bind: rng.gen(),
            };
            if rng.gen_ratio(1, 10) {
                ne.va = 0u64.wrapping_sub(ne.len); // region ending at 2^64
            }
            if ne.va as u128 + ne.len as u128 > 1u128 << 64 {
                ne.len = ((1u128 << 64) - ne.va as u128) as u64;
            }
            kc.wr_en.next = wr;
            kc.inv_en.next = inv;
            kc.wr_index.next = bits::<4>(wi as u64);
            kc.wr_valid.next = ne.valid;
            kc.wr_tag.next = bits::<8>(ne.tag as u64);
            kc.wr_pd.next = bits::<24>(ne.pd as u64);
            kc.wr_access.next = bits::<4>(ne.acc as u64);
            kc.wr_va.next = bits::<64>(ne.va);
            kc.wr_len.next = bits::<64>(ne.len);
            kc.wr_base.next = bits::<64>(ne.base);
            kc.wr_fast.next = ne.fast;
            kc.wr_mw.next = ne.mw;
            kc.wr_mw2.next = ne.mw2;
            kc.wr_qpn.next = bits::<8>(ne.qpn as u64);
            kc.wr_bind.next = ne.bind;
            // lookup
            let lv = rng.gen_ratio(3, 4);
            let idx = rng.gen_range(0..18u32);
            let e = t[(idx as usize).min(15)];
            let key = idx << 8 | if rng.gen_ratio(7, 8) { e.tag as u32 } else { rng.gen_range(0..4) };
            let pd = if rng.gen_ratio(7, 8) { e.pd } else { rng.gen_range(0..3) };
            let need = if rng.gen_ratio(3, 4) { e.acc & rng.gen::<u8>() } else { rng.gen_range(0..16) };
            let len: u32 = match rng.gen_range(0..8) {
                0 => 0,
                1 => u32::MAX,
                _ => rng.gen_range(1..(e.len.min(70000) as u32 + 2)),
            };
            let va = match rng.gen_range(0..6) {
                0 => e.va,
                1 => (e.va.wrapping_add(e.len)).wrapping_sub(len as u64),
                2 => e.va.wrapping_sub(1),
                3 => rng.gen(),
                _ => e.va.wrapping_add(rng.gen_range(0..e.len.max(1))),
            };
            kc.lk_valid.next = lv;
            kc.lk_key.next = bits::<32>(key as u64);
            kc.lk_pd.next = bits::<24>(pd as u64);
            kc.lk_va.next = bits::<64>(va);
            kc.lk_len.next = bits::<32>(len as u64);
            kc.lk_access.next = bits::<4>(need as u64);
            let remote: bool = rng.gen();
            kc.lk_remote.next = remote;
            let (lqpn, lbind): (u8, bool) = (if rng.gen_ratio(3, 4) { e.qpn } else { rng.gen_range(0..3) }, rng.gen_ratio(1, 4));
            kc.lk_qpn.next = bits::<8>(lqpn as u64);
            kc.lk_bind.next = lbind;
            kc.clock.next = false.into();
            assert!(simulate(&mut *kc, 50));
            // results
            let want = if pending.len() == LATENCY { pending.pop_front().unwrap() } else { None };
            assert_eq!(kc.res_valid.val(), want.is_some(), "cycle {cycle}");
            if let Some((err, dma, len, inv, free)) = want {
                assert_eq!(kc.res_inv.val(), inv, "cycle {cycle}: may it be invalidated");
                assert_eq!(kc.res_free.val(), free, "cycle {cycle}: may a type 2 window be bound");
                assert_eq!(KcErr::from_code(kc.res_err.val().to_u64()), Some(err), "cycle {cycle}");
                assert_eq!(kc.res_ok.val(), err == KcErr::Ok, "cycle {cycle}");
                if err == KcErr::Ok && len != 0 {
                    assert_eq!(kc.res_dma.val().to_u64(), dma, "cycle {cycle}");
                }
                checked += 1;
            }
            // the lookup sees the table before this cycle's write
            pending.push_back(lv.then(|| {
                let (e, d) = check(&t, N, key, pd, va, len, need, remote, lqpn, lbind);
                (e, d, len, may_invalidate(&t, N, key, pd), may_bind(&t, N, key, pd))
            }));
            if wr {
                t[wi] = ne;
            }
            if inv {
                t[wi].valid = false;
            }
            kc.clock.next = true.into();
            assert!(simulate(&mut *kc, 50));
        }
        assert!(checked > 2000);
        let v = generate_verilog(&*kc);
        yosys_validate("key_cache", &v).unwrap();
    }
}
