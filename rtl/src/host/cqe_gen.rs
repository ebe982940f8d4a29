//! CQE Generation: completions in, 32-byte CQEs written into the completion-queue rings in host memory.
//!
//! **Per CQ** (`N` CQs, `N = 2^AW`): ring base (64-byte aligned; the low 6 bits of `setup_base` are ignored),
//! log2 entries (1..16, [`CQ_LOG2_MAX`]), producer index `pi`, phase (1 on a fresh ring, flipped each time
//! `pi` wraps), consumer index `ci` (the driver's CQ doorbell, `rnic_driver::host::cq_doorbell`), error flag.
//! A setup (`CMD_WRITE_CQ`) resets `pi = ci = 0`, phase 1, error 0; a setup with log2 outside 1..16 leaves the
//! CQ "not set up". Setups and doorbells for `cqn >= N` are ignored.
//!
//! **Completions** (`cq_*`, valid/ready): the CQE is formed exactly as `rnic_driver::host::Cqe::encode` does,
//! by a [`ByteMap`] whose table is found by probing the golden `encode` ([`cqe_byte_map`]). `cq_imm` carries
//! CQE bytes 12..15 as they stand, byte 12 in bits 7:0 ([`cqe_imm_field`]): the producer has already put
//! immediate data in wire order or the invalidated rkey little-endian. A CQE goes to slot `pi mod entries`,
//! address `base + 32 * slot`: beat `(base + 32 * slot) & !63` with the 32-byte strobe of its half. The other
//! half of the beat's data carries a copy of the same CQE and is not strobed.
//!
//! **Overflow.** A completion for a CQ that is full (`(pi - ci) mod 2^16 == capacity`), in error, not set up,
//! or `cqn >= N` is not written: the CQ goes to error (sticky until the next setup; IBA CQ overrun, an
//! asynchronous error), `ovf_valid` pulses with `ovf_cqn`, and `ovf_count` counts it. The capacity is
//! `entries`, except for a 2^16-entry ring: 16-bit indices cannot tell a ring of 2^16 unread CQEs from an empty
//! one, so that ring holds at most 2^16 - 1. Nothing is ever written outside `[base, base + 32 * entries)`.
//!
//! **Pipeline** (one completion every 2 cycles, `cq_ready` low in the cycle after an accept; no stall):
//! S0 accept, RAM reads, per-CQ flag reads; S1 forwarding of the setups, doorbells and the write-back that
//! the RAM reads missed; S2 the full check and the state write-back (the commit); S3..S5 the beat address
//! `base + slot/2` in the Key Cache's pipelined adder ([`PipeAdd64`], 8-bit slices); then a 16-entry
//! show-ahead FIFO drives the DMA write port. `cq_ready` also
//! needs room in that FIFO for everything in flight (a registered check).
//!
//! **State without write-port conflicts.** Every RAM has one writer: the static RAM (base, mask) and the
//! capacity LUTRAMs are written by setups, the limit RAM by doorbells, the state RAM (`pi`, phase, error) by
//! the commit. A setup's resets of the doorbell and the state are two flag vectors of `N` bits (`fresh`: the
//! state RAM entry is stale, read it as `pi = 0`, phase 1, no error; `live`: the limit RAM entry is valid, else
//! `ci = 0`), each set by one writer and cleared by another in the same cycle without conflict.
//!
//! **Full check without a subtractor.** A doorbell stores `limit = ci + capacity` (mod 2^16; the capacity comes
//! from a LUTRAM copy read in the doorbell's cycle); the commit tests `pi == limit`, exactly
//! `(pi - ci) mod 2^16 == capacity` for any `ci`.
//!
//! **Ordering** (what the tests' reference model does): the completion accepted in cycle `a` commits in cycle
//! `a + 2`. In each cycle the commit comes first, then the doorbell presented in the previous cycle, then a
//! setup presented in this cycle. A doorbell presented together with a setup of the same CQ is dropped (the
//! setup resets `ci`). So a completion sees every setup up to its S1 cycle (`a + 1`) and every doorbell up to
//! cycle `a`; a completion committed in the cycle of a setup of its CQ still goes to the old ring.
//!
//! CQE writes are posted (no write response is needed here): the producer sends a completion only after the
//! data it completes is in host memory, and the DMA port keeps writes in order.

use crate::common::bytemap::{ByteMap, ByteSrc};
use crate::common::consts::k;
use crate::common::counter::EventCounter;
use crate::common::fifo::{DistRam, Fifo, SdpRam};
use crate::transport::key_cache::PipeAdd64;
use crate::common::lut::Lut8;
use rust_hdl::prelude::*;

use crate::common::ports::{CqSink, DmaWrite};
use rnic_driver::host::{Cqe, CQE_BYTES, DMA_BEAT_BYTES};
use testbench::model::verbs::WcFlags;

/// Smallest and largest log2 of a CQ's number of entries (`RingCmd`: 1..16; the indices are 16 bits).
pub const CQ_LOG2_MIN: usize = 1;
pub const CQ_LOG2_MAX: usize = 16;
/// Entries of the output FIFO (log2).
const OUT_AW: usize = 4;

/// The completion fields as they ride the pipeline (`ph8` is the byte that carries the phase bit).
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct CqeFields {
    pub wr_id: Bits<64>,
    pub byte_len: Bits<32>,
    pub imm: Bits<32>,
    pub qp_num: Bits<24>,
    pub src_qp: Bits<24>,
    pub status: Bits<8>,
    pub opcode: Bits<8>,
    pub wc_flags: Bits<8>,
    pub ph8: Bits<8>,
}

/// Bits of a packed [`CqeFields`].
pub const CQF_BITS: usize = <CqeFields as Synth>::BITS;

/// One CQE write waiting for the DMA port: beat address (bits 63:6), which half, the fields.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct CqeWrite {
    pub beat: Bits<58>,
    pub hi: Bit,
    pub f: CqeFields,
}

/// Per-CQ state written by the commit.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct CqState {
    pub pi: Bits<16>,
    pub phase: Bit,
    pub err: Bit,
}

/// Per-CQ static attributes written by a setup: ring base in beats, `entries - 1` (0: not set up).
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct CqStatic {
    pub base: Bits<58>,
    pub mask: Bits<16>,
}

/// The value of `cq_imm` for a golden CQE: CQE bytes 12..15 as `Cqe::encode` writes them, byte 12 in bits 7:0.
pub fn cqe_imm_field(c: &Cqe) -> u32 {
    let b = c.encode();
    u32::from_le_bytes(b[12..16].try_into().unwrap())
}

/// The ring capacity of a CQ of `2^log2` entries (see the module documentation), 0 for an invalid log2.
pub fn cq_capacity(log2: usize) -> u64 {
    match log2 {
        CQ_LOG2_MAX => (1 << CQ_LOG2_MAX) - 1,
        l if (CQ_LOG2_MIN..CQ_LOG2_MAX).contains(&l) => 1 << l,
        _ => 0,
    }
}

/// Setup table, indexed by log2: bits 15:0 `entries - 1`, bits 31:16 the capacity; 0 for an invalid log2.
pub fn cq_log2_table() -> Vec<u64> {
    (0..32usize).map(|l| if cq_capacity(l) == 0 { 0 } else { ((1u64 << l) - 1) | cq_capacity(l) << 16 }).collect()
}

/// The byte map from a packed [`CqeFields`] to the 32 CQE bytes, and the value of `ph8` for phase 1, found by
/// probing the golden `Cqe::encode` one field byte at a time (so no CQE offset is typed here).
pub fn cqe_byte_map() -> (Vec<ByteSrc>, u8) {
    let f = CqeFields::default();
    let mut map: Vec<Option<ByteSrc>> = vec![None; CQE_BYTES];
    assert!(Cqe::default().encode().iter().all(|&b| b == 0), "a zero CQE encodes to zeros");
    let mut probe = |off: usize, nbytes: usize, base: Cqe, set: &dyn Fn(&mut Cqe, u64)| {
        let b0 = base.encode();
        for kb in 0..nbytes {
            let mut c = base;
            set(&mut c, 0xFF << (8 * kb));
            let b1 = c.encode();
            let diff: Vec<usize> = (0..CQE_BYTES).filter(|&j| b0[j] != b1[j]).collect();
            assert_eq!(diff.len(), 1, "field byte at bit {off}+{kb}*8 lands in one CQE byte");
            let j = diff[0];
            assert!(b0[j] == 0 && b1[j] == 0xFF && map[j].is_none());
            map[j] = Some(ByteSrc::In(off + 8 * kb));
        }
    };
    let z = Cqe::default();
    probe(f.get_my_offset_wr_id(), 8, z, &|c, v| c.wr_id = v);
    probe(f.get_my_offset_byte_len(), 4, z, &|c, v| c.byte_len = v as u32);
    // the little-endian form of bytes 12..15 (invalidated rkey): the raw bytes, as `cq_imm` carries them
    let inv = Cqe { wc_flags: WcFlags::WITH_INV as u8, ..z };
    probe(f.get_my_offset_imm(), 4, inv, &|c, v| c.imm_or_inv = v as u32);
    probe(f.get_my_offset_qp_num(), 3, z, &|c, v| c.qp_num = v as u32);
    probe(f.get_my_offset_src_qp(), 3, z, &|c, v| c.src_qp = v as u32);
    probe(f.get_my_offset_status(), 1, z, &|c, v| c.status = v as u8);
    probe(f.get_my_offset_opcode(), 1, z, &|c, v| c.opcode = v as u8);
    probe(f.get_my_offset_wc_flags(), 1, z, &|c, v| c.wc_flags = v as u8);
    let (p0, p1) = (z.encode(), Cqe { phase: true, ..z }.encode());
    let diff: Vec<usize> = (0..CQE_BYTES).filter(|&j| p0[j] != p1[j]).collect();
    assert_eq!(diff.len(), 1, "the phase bit lives in one byte");
    assert!(map[diff[0]].is_none());
    map[diff[0]] = Some(ByteSrc::In(f.get_my_offset_ph8()));
    (map.into_iter().map(|s| s.unwrap_or(ByteSrc::Const(0))).collect(), p1[diff[0]])
}

/// CQE Generation (see the module documentation). `N = 2^AW` CQs.
#[derive(LogicBlock)]
pub struct CqeGen<const N: usize, const AW: usize> {
    pub clock: Signal<In, Clock>,
    // setup (CMD_WRITE_CQ)
    pub setup_valid: Signal<In, Bit>,
    pub setup_cqn: Signal<In, Bits<24>>,
    pub setup_base: Signal<In, Bits<64>>,
    pub setup_log2: Signal<In, Bits<5>>,
    // CQ doorbell: the driver's consumer index
    pub ci_valid: Signal<In, Bit>,
    pub ci_cqn: Signal<In, Bits<24>>,
    pub ci_value: Signal<In, Bits<16>>,
    // completions
    pub cq: CqSink,
    /// DMA write port: one 64-byte beat, 32 bytes strobed, `last` always high.
    pub dma: DmaWrite,
    // events
    pub ovf_valid: Signal<Out, Bit>,
    pub ovf_cqn: Signal<Out, Bits<24>>,
    pub ovf_count: Signal<Out, Bits<32>>,
    pub cqe_count: Signal<Out, Bits<32>>,

    // memories (one writer each)
    st_ram: SdpRam<CqStatic, AW>,
    lim_ram: SdpRam<Bits<16>, AW>,
    pi_ram: SdpRam<CqState, AW>,
    cap_db: DistRam<Bits<16>, AW>,
    cap_cq: DistRam<Bits<16>, AW>,
    fresh: DFF<Bits<N>>,
    live: DFF<Bits<N>>,
    log2_lut: Lut8<32>,
    // setup and doorbell inputs
    su_ok: Signal<Local, Bit>,
    su_idx: Signal<Local, Bits<AW>>,
    su_mask: Signal<Local, Bits<16>>,
    su_cap: Signal<Local, Bits<16>>,
    su_st: Signal<Local, CqStatic>,
    db_ok: Signal<Local, Bit>,
    db_idx: Signal<Local, Bits<AW>>,
    fr_set: Signal<Local, Bits<N>>,
    fr_clr: Signal<Local, Bits<N>>,
    lv_set: Signal<Local, Bits<N>>,
    // doorbell stage D1: limit = ci + capacity
    d1_v: DFF<Bit>,
    d1_idx: DFF<Bits<AW>>,
    d1_lim: DFF<Bits<16>>,
    // S0
    accept: Signal<Local, Bit>,
    /// the completion's CQ
    l_cqn: Signal<Local, Bits<24>>,
    cq_idx: Signal<Local, Bits<AW>>,
    room: DFF<Bit>,
    // S1
    s1_v: DFF<Bit>,
    s1_cqn: DFF<Bits<24>>,
    s1_inr: DFF<Bit>,
    s1_f: DFF<CqeFields>,
    s1_fresh: DFF<Bit>,
    s1_live: DFF<Bit>,
    s1_cap: DFF<Bits<16>>,
    h_cm: DFF<Bit>,
    h_cm_st: DFF<CqState>,
    h_su: DFF<Bit>,
    h_su_st: DFF<CqStatic>,
    h_su_cap: DFF<Bits<16>>,
    h_d1: DFF<Bit>,
    h_d1_lim: DFF<Bits<16>>,
    s1_idx: Signal<Local, Bits<AW>>,
    hit_su1: Signal<Local, Bit>,
    hit_d1: Signal<Local, Bit>,
    // S2 (commit)
    s2_v: DFF<Bit>,
    s2_cqn: DFF<Bits<24>>,
    s2_inr: DFF<Bit>,
    s2_f: DFF<CqeFields>,
    s2_st: DFF<CqStatic>,
    s2_lim: DFF<Bits<16>>,
    s2_state: DFF<CqState>,
    s2_idx: Signal<Local, Bits<AW>>,
    s2_pi: Signal<Local, Bits<16>>,
    s2_ph: Signal<Local, Bit>,
    s2_err: Signal<Local, Bit>,
    s2_mask: Signal<Local, Bits<16>>,
    pi_inc: Signal<Local, Bits<16>>,
    slot: Signal<Local, Bits<16>>,
    full: Signal<Local, Bit>,
    set_up: Signal<Local, Bit>,
    ok: Signal<Local, Bit>,
    wrap: Signal<Local, Bit>,
    commit: Signal<Local, Bit>,
    new_st: Signal<Local, CqState>,
    // S3..S5: the beat address base + slot/2 (pipelined adder, 8-bit slices), the rest delayed beside it
    add_beat: PipeAdd64,
    s2_base: Signal<Local, Bits<58>>,
    s3_v: DFF<Bit>,
    s3_f: DFF<CqeFields>,
    s3_hi: DFF<Bit>,
    s4_v: DFF<Bit>,
    s4_f: DFF<CqeFields>,
    s4_hi: DFF<Bit>,
    s5_v: DFF<Bit>,
    s5_f: DFF<CqeFields>,
    s5_hi: DFF<Bit>,
    wrec: Signal<Local, CqeWrite>,
    // output
    out: Fifo<CqeWrite, OUT_AW, 5>,
    orec: Signal<Local, CqeWrite>,
    form: ByteMap<CQF_BITS, 256>,
    cqe: Signal<Local, Bits<256>>,
    o_v: DFF<Bit>,
    o_cqn: DFF<Bits<24>>,
    ovf_cnt: EventCounter,
    cqe_cnt: EventCounter,
    // constants
    k_n: Constant<Bits<24>>,
    k_one_n: Constant<Bits<N>>,
    k_zero_n: Constant<Bits<N>>,
    k_fresh: Constant<CqState>,
    k_st0: Constant<CqStatic>,
    k_wrec0: Constant<CqeWrite>,
    k_ph8: Constant<Bits<8>>,
    k0_8: Constant<Bits<8>>,
    k1_16: Constant<Bits<16>>,
    k_room: Constant<Bits<5>>,
    k_strb_lo: Constant<Bits<64>>,
    k_strb_hi: Constant<Bits<64>>,
}

impl<const N: usize, const AW: usize> Default for CqeGen<N, AW> {
    fn default() -> Self {
        assert!(N == 1 << AW && AW <= 16, "CqeGen<N, AW>: N = 2^AW CQs");
        assert_eq!(DMA_BEAT_BYTES, 2 * CQE_BYTES, "two CQEs per DMA beat");
        assert_eq!(DMA_BEAT_BYTES, 64, "beat addresses are bits 63:6");
        let (map, ph8) = cqe_byte_map();
        let strb_lo = (1u64 << CQE_BYTES) - 1;
        Self {
            clock: Default::default(),
            setup_valid: Default::default(),
            setup_cqn: Default::default(),
            setup_base: Default::default(),
            setup_log2: Default::default(),
            ci_valid: Default::default(),
            ci_cqn: Default::default(),
            ci_value: Default::default(),
            cq: Default::default(),
            l_cqn: Default::default(),
            dma: Default::default(),
            ovf_valid: Default::default(),
            ovf_cqn: Default::default(),
            ovf_count: Default::default(),
            cqe_count: Default::default(),
            st_ram: Default::default(),
            lim_ram: Default::default(),
            pi_ram: Default::default(),
            cap_db: Default::default(),
            cap_cq: Default::default(),
            fresh: Default::default(),
            live: Default::default(),
            log2_lut: Lut8::new(cq_log2_table()),
            su_ok: Default::default(),
            su_idx: Default::default(),
            su_mask: Default::default(),
            su_cap: Default::default(),
            su_st: Default::default(),
            db_ok: Default::default(),
            db_idx: Default::default(),
            fr_set: Default::default(),
            fr_clr: Default::default(),
            lv_set: Default::default(),
            d1_v: Default::default(),
            d1_idx: Default::default(),
            d1_lim: Default::default(),
            accept: Default::default(),
            cq_idx: Default::default(),
            room: Default::default(),
            s1_v: Default::default(),
            s1_cqn: Default::default(),
            s1_inr: Default::default(),
            s1_f: Default::default(),
            s1_fresh: Default::default(),
            s1_live: Default::default(),
            s1_cap: Default::default(),
            h_cm: Default::default(),
            h_cm_st: Default::default(),
            h_su: Default::default(),
            h_su_st: Default::default(),
            h_su_cap: Default::default(),
            h_d1: Default::default(),
            h_d1_lim: Default::default(),
            s1_idx: Default::default(),
            hit_su1: Default::default(),
            hit_d1: Default::default(),
            s2_v: Default::default(),
            s2_cqn: Default::default(),
            s2_inr: Default::default(),
            s2_f: Default::default(),
            s2_st: Default::default(),
            s2_lim: Default::default(),
            s2_state: Default::default(),
            s2_idx: Default::default(),
            s2_pi: Default::default(),
            s2_ph: Default::default(),
            s2_err: Default::default(),
            s2_mask: Default::default(),
            pi_inc: Default::default(),
            slot: Default::default(),
            full: Default::default(),
            set_up: Default::default(),
            ok: Default::default(),
            wrap: Default::default(),
            commit: Default::default(),
            new_st: Default::default(),
            add_beat: Default::default(),
            s2_base: Default::default(),
            s3_v: Default::default(),
            s3_f: Default::default(),
            s3_hi: Default::default(),
            s4_v: Default::default(),
            s4_f: Default::default(),
            s4_hi: Default::default(),
            s5_v: Default::default(),
            s5_f: Default::default(),
            s5_hi: Default::default(),
            wrec: Default::default(),
            out: Default::default(),
            orec: Default::default(),
            form: ByteMap::new(map),
            cqe: Default::default(),
            o_v: Default::default(),
            o_cqn: Default::default(),
            ovf_cnt: Default::default(),
            cqe_cnt: Default::default(),
            k_n: k(N as u64),
            k_one_n: Constant::new(bits::<N>(1)),
            k_zero_n: Constant::new(bits::<N>(0)),
            k_fresh: Constant::new(CqState { pi: bits(0), phase: true, err: false }),
            k_st0: Constant::new(CqStatic::default()),
            k_wrec0: Constant::new(CqeWrite::default()),
            k_ph8: k(ph8 as u64),
            k0_8: k(0),
            k1_16: k(1),
            // room for this accept and everything in flight (S1..S5 hold at most three, one more may be
            // accepted before the registered check sees the last push)
            k_room: k(((1 << OUT_AW) - 5) as u64),
            k_strb_lo: k(strb_lo),
            k_strb_hi: k(strb_lo << CQE_BYTES),
        }
    }
}

impl<const N: usize, const AW: usize> Logic for CqeGen<N, AW> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, fresh, live, d1_v, d1_idx, d1_lim, room, s1_v, s1_cqn, s1_inr, s1_f, s1_fresh, s1_live,
            s1_cap, h_cm, h_cm_st, h_su, h_su_st, h_su_cap, h_d1, h_d1_lim, s2_v, s2_cqn, s2_inr, s2_f, s2_st, s2_lim,
            s2_state, s3_v, s3_f, s3_hi, s4_v, s4_f, s4_hi, s5_v, s5_f, s5_hi, o_v, o_cqn
        );
        clock!(self, clock, st_ram, lim_ram, pi_ram, cap_db, cap_cq, add_beat, out, ovf_cnt, cqe_cnt);

        // ---- setup: static RAM, capacity LUTRAMs, the state and limit resets as flags ----
        self.su_ok.next = self.setup_valid.val() & (self.setup_cqn.val() < self.k_n.val());
        self.su_idx.next = self.setup_cqn.val().get_bits::<AW>(0);
        self.log2_lut.x.next = bit_cast::<8, 5>(self.setup_log2.val());
        self.su_mask.next = self.log2_lut.y.val().get_bits::<16>(0);
        self.su_cap.next = self.log2_lut.y.val().get_bits::<16>(16);
        self.su_st.next = self.k_st0.val();
        self.su_st.next.base = self.setup_base.val().get_bits::<58>(6);
        self.su_st.next.mask = self.su_mask.val();
        self.st_ram.we.next = self.su_ok.val();
        self.st_ram.waddr.next = self.su_idx.val();
        self.st_ram.wdata.next = self.su_st.val();
        self.cap_db.we.next = self.su_ok.val();
        self.cap_db.waddr.next = self.su_idx.val();
        self.cap_db.wdata.next = self.su_cap.val();
        self.cap_cq.we.next = self.su_ok.val();
        self.cap_cq.waddr.next = self.su_idx.val();
        self.cap_cq.wdata.next = self.su_cap.val();
        self.fr_set.next = self.k_zero_n.val();
        if self.su_ok.val() {
            self.fr_set.next = self.k_one_n.val() << self.su_idx.val();
        }

        // ---- doorbell: limit = ci + capacity, written in D1 (dropped if a setup of its CQ is in its cycle) ----
        self.db_ok.next = self.ci_valid.val() & (self.ci_cqn.val() < self.k_n.val());
        self.db_idx.next = self.ci_cqn.val().get_bits::<AW>(0);
        self.cap_db.raddr.next = self.db_idx.val();
        self.d1_v.d.next = self.db_ok.val() & !(self.su_ok.val() & (self.su_idx.val() == self.db_idx.val()));
        self.d1_idx.d.next = self.db_idx.val();
        self.d1_lim.d.next = self.ci_value.val() + self.cap_db.rdata.val();
        self.lim_ram.we.next = self.d1_v.q.val();
        self.lim_ram.waddr.next = self.d1_idx.q.val();
        self.lim_ram.wdata.next = self.d1_lim.q.val();
        self.lv_set.next = self.k_zero_n.val();
        if self.d1_v.q.val() {
            self.lv_set.next = self.k_one_n.val() << self.d1_idx.q.val();
        }
        // a setup after the doorbell in the same cycle wins: ci = 0
        self.live.d.next = (self.live.q.val() | self.lv_set.val()) & !self.fr_set.val();

        // ---- S2: full check and commit ----
        self.s2_idx.next = self.s2_cqn.q.val().get_bits::<AW>(0);
        self.s2_pi.next = self.s2_state.q.val().pi;
        self.s2_ph.next = self.s2_state.q.val().phase;
        self.s2_err.next = self.s2_state.q.val().err;
        self.s2_mask.next = self.s2_st.q.val().mask;
        self.pi_inc.next = self.s2_pi.val() + self.k1_16.val();
        self.slot.next = self.s2_pi.val() & self.s2_mask.val();
        self.full.next = self.s2_pi.val() == self.s2_lim.q.val();
        self.set_up.next = self.s2_mask.val().get_bit(0);
        self.ok.next = self.s2_inr.q.val() & self.set_up.val() & !self.s2_err.val() & !self.full.val();
        self.wrap.next = self.slot.val() == self.s2_mask.val();
        self.commit.next = self.s2_v.q.val() & self.s2_inr.q.val() & self.set_up.val();
        self.new_st.next = self.s2_state.q.val();
        if self.ok.val() {
            self.new_st.next.pi = self.pi_inc.val();
            if self.wrap.val() {
                self.new_st.next.phase = !self.s2_ph.val();
            }
        } else {
            self.new_st.next.err = true;
        }
        self.pi_ram.we.next = self.commit.val();
        self.pi_ram.waddr.next = self.s2_idx.val();
        self.pi_ram.wdata.next = self.new_st.val();
        self.fr_clr.next = self.k_zero_n.val();
        if self.commit.val() {
            self.fr_clr.next = self.k_one_n.val() << self.s2_idx.val();
        }
        // a setup after the commit in the same cycle wins: the state is fresh
        self.fresh.d.next = (self.fresh.q.val() & !self.fr_clr.val()) | self.fr_set.val();
        self.o_v.d.next = self.s2_v.q.val() & !self.ok.val();
        self.o_cqn.d.next = self.s2_cqn.q.val();
        self.ovf_cnt.inc.next = self.s2_v.q.val() & !self.ok.val();
        self.cqe_cnt.inc.next = self.s2_v.q.val() & self.ok.val();
        self.s3_v.d.next = self.s2_v.q.val() & self.ok.val();
        self.s3_f.d.next = self.s2_f.q.val();
        if self.s2_ph.val() {
            self.s3_f.d.next.ph8 = self.k_ph8.val();
        }
        self.s3_hi.d.next = self.slot.val().get_bit(0);
        self.s2_base.next = self.s2_st.q.val().base;
        self.add_beat.a.next = bit_cast::<64, 58>(self.s2_base.val());
        self.add_beat.b.next = bit_cast::<64, 15>(self.slot.val().get_bits::<15>(1));
        self.add_beat.cin.next = false;

        // ---- S1: forward what the S0 reads missed (time order: later wins) ----
        self.s1_idx.next = self.s1_cqn.q.val().get_bits::<AW>(0);
        self.hit_su1.next = self.su_ok.val() & (self.su_idx.val() == self.s1_idx.val());
        self.hit_d1.next = self.d1_v.q.val() & (self.d1_idx.q.val() == self.s1_idx.val());
        self.s2_st.d.next = self.st_ram.rdata.val();
        if self.h_su.q.val() {
            self.s2_st.d.next = self.h_su_st.q.val();
        }
        if self.hit_su1.val() {
            self.s2_st.d.next = self.su_st.val();
        }
        self.s2_lim.d.next = self.s1_cap.q.val();
        if self.s1_live.q.val() {
            self.s2_lim.d.next = self.lim_ram.rdata.val();
        }
        if self.h_d1.q.val() {
            self.s2_lim.d.next = self.h_d1_lim.q.val();
        }
        if self.h_su.q.val() {
            self.s2_lim.d.next = self.h_su_cap.q.val();
        }
        if self.hit_d1.val() {
            self.s2_lim.d.next = self.d1_lim.q.val();
        }
        if self.hit_su1.val() {
            self.s2_lim.d.next = self.su_cap.val();
        }
        self.s2_state.d.next = self.pi_ram.rdata.val();
        if self.s1_fresh.q.val() {
            self.s2_state.d.next = self.k_fresh.val();
        }
        if self.h_cm.q.val() {
            self.s2_state.d.next = self.h_cm_st.q.val();
        }
        if self.h_su.q.val() | self.hit_su1.val() {
            self.s2_state.d.next = self.k_fresh.val();
        }
        self.s2_v.d.next = self.s1_v.q.val();
        self.s2_cqn.d.next = self.s1_cqn.q.val();
        self.s2_inr.d.next = self.s1_inr.q.val();
        self.s2_f.d.next = self.s1_f.q.val();

        // ---- S0: accept, RAM and flag reads, the events of this cycle the reads miss ----
        self.room.d.next = self.out.count.val() <= self.k_room.val();
        self.cq.ready.next = self.room.q.val() & !self.s1_v.q.val();
        self.accept.next = self.cq.valid.val() & self.room.q.val() & !self.s1_v.q.val();
        self.l_cqn.next = self.cq.wc.val().cqn;
        self.cq_idx.next = self.l_cqn.val().get_bits::<AW>(0);
        self.st_ram.raddr.next = self.cq_idx.val();
        self.lim_ram.raddr.next = self.cq_idx.val();
        self.pi_ram.raddr.next = self.cq_idx.val();
        self.cap_cq.raddr.next = self.cq_idx.val();
        self.s1_v.d.next = self.accept.val();
        self.s1_cqn.d.next = self.l_cqn.val();
        self.s1_inr.d.next = self.l_cqn.val() < self.k_n.val();
        self.s1_f.d.next.wr_id = self.cq.wc.val().wr_id;
        self.s1_f.d.next.byte_len = self.cq.wc.val().byte_len;
        self.s1_f.d.next.imm = self.cq.wc.val().imm;
        self.s1_f.d.next.qp_num = self.cq.wc.val().qp_num;
        self.s1_f.d.next.src_qp = self.cq.wc.val().src_qp;
        self.s1_f.d.next.status = self.cq.wc.val().status;
        self.s1_f.d.next.opcode = self.cq.wc.val().opcode;
        self.s1_f.d.next.wc_flags = self.cq.wc.val().wc_flags;
        self.s1_f.d.next.ph8 = self.k0_8.val();
        self.s1_fresh.d.next = self.fresh.q.val().get_bit(self.cq_idx.val().index());
        self.s1_live.d.next = self.live.q.val().get_bit(self.cq_idx.val().index());
        self.s1_cap.d.next = self.cap_cq.rdata.val();
        self.h_cm.d.next = self.commit.val() & (self.s2_idx.val() == self.cq_idx.val());
        self.h_cm_st.d.next = self.new_st.val();
        self.h_su.d.next = self.su_ok.val() & (self.su_idx.val() == self.cq_idx.val());
        self.h_su_st.d.next = self.su_st.val();
        self.h_su_cap.d.next = self.su_cap.val();
        self.h_d1.d.next = self.d1_v.q.val() & (self.d1_idx.q.val() == self.cq_idx.val());
        self.h_d1_lim.d.next = self.d1_lim.q.val();

        // ---- S3, S4: wait for the adder; S5: FIFO push ----
        self.s4_v.d.next = self.s3_v.q.val();
        self.s4_f.d.next = self.s3_f.q.val();
        self.s4_hi.d.next = self.s3_hi.q.val();
        self.s5_v.d.next = self.s4_v.q.val();
        self.s5_f.d.next = self.s4_f.q.val();
        self.s5_hi.d.next = self.s4_hi.q.val();
        self.wrec.next = self.k_wrec0.val();
        self.wrec.next.beat = self.add_beat.sum.val().get_bits::<58>(0);
        self.wrec.next.hi = self.s5_hi.q.val();
        self.wrec.next.f = self.s5_f.q.val();
        self.out.push.next = self.s5_v.q.val();
        self.out.din.next = self.wrec.val();

        // ---- DMA write port ----
        self.orec.next = self.out.dout.val();
        self.form.x.next = self.orec.val().f.into();
        self.cqe.next = self.form.y.val();
        self.dma.valid.next = !self.out.empty.val();
        self.dma.last.next = true;
        self.out.pop.next = self.dma.ready.val() & !self.out.empty.val();
        self.dma.addr.next = bit_cast::<64, 58>(self.orec.val().beat) << 6;
        self.dma.data.next = (bit_cast::<512, 256>(self.cqe.val()) << 256) | bit_cast::<512, 256>(self.cqe.val());
        self.dma.strb.next = self.k_strb_lo.val();
        if self.orec.val().hi {
            self.dma.strb.next = self.k_strb_hi.val();
        }

        // ---- events ----
        self.ovf_valid.next = self.o_v.q.val();
        self.ovf_cqn.next = self.o_cqn.q.val();
        self.ovf_count.next = self.ovf_cnt.value.val();
        self.cqe_count.next = self.cqe_cnt.value.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::{HashMap, VecDeque};
    use rnic_driver::host::{WC_RDMA_WRITE, WC_RECV, WC_RECV_RDMA_WITH_IMM, WC_SEND};

    const NQ: usize = 16;
    type Gen = CqeGen<NQ, 4>;

    #[test]
    fn byte_map_forms_the_golden_cqe() {
        let (map, ph8) = cqe_byte_map();
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..2000 {
            let c = random_cqe(&mut rng);
            let f = fields_of(&c, if c.phase { ph8 } else { 0 });
            let packed: Bits<CQF_BITS> = f.into();
            let mut b = [0u8; CQE_BYTES];
            for (i, s) in map.iter().enumerate() {
                b[i] = match *s {
                    ByteSrc::Const(v) => v,
                    ByteSrc::In(off) => packed.get_bits::<8>(off).to_u64() as u8,
                };
            }
            assert_eq!(b, c.encode());
            assert_eq!(Cqe::decode(&b), c);
        }
        assert_eq!(cq_capacity(16), 0xFFFF);
        assert_eq!(cq_capacity(3), 8);
        assert_eq!(cq_capacity(0), 0);
        assert_eq!(cq_capacity(17), 0);
    }

    fn random_cqe(rng: &mut SmallRng) -> Cqe {
        let flags = match rng.gen_range(0..4) {
            0 => WcFlags::WITH_INV as u8,
            1 => WcFlags::WITH_IMM as u8,
            2 => rng.gen(),
            _ => 0,
        };
        Cqe {
            wr_id: rng.gen(),
            byte_len: rng.gen(),
            imm_or_inv: rng.gen(),
            qp_num: rng.gen_range(0..1 << 24),
            src_qp: rng.gen_range(0..1 << 24),
            status: rng.gen_range(0..22),
            opcode: [WC_SEND, WC_RDMA_WRITE, WC_RECV, WC_RECV_RDMA_WITH_IMM][rng.gen_range(0..4)],
            wc_flags: flags,
            phase: rng.gen(),
        }
    }

    fn fields_of(c: &Cqe, ph8: u8) -> CqeFields {
        CqeFields {
            wr_id: bits(c.wr_id),
            byte_len: bits(c.byte_len as u64),
            imm: bits(cqe_imm_field(c) as u64),
            qp_num: bits(c.qp_num as u64),
            src_qp: bits(c.src_qp as u64),
            status: bits(c.status as u64),
            opcode: bits(c.opcode as u64),
            wc_flags: bits(c.wc_flags as u64),
            ph8: bits(ph8 as u64),
        }
    }

    /// The reference: the CQ rules of the host interface written out directly, independent of the RTL (the ring
    /// is full when (pi - ci) mod 2^16 == capacity).
    #[derive(Clone, Debug, Default)]
    struct RefCq {
        set: bool,
        base: u64,
        log2: usize,
        pi: u16,
        ci: u16,
        phase: bool,
        err: bool,
    }

    #[derive(Default)]
    struct Model {
        cq: Vec<RefCq>,
    }

    impl Model {
        fn new() -> Self {
            Model { cq: vec![RefCq::default(); NQ] }
        }
        fn setup(&mut self, cqn: usize, base: u64, log2: usize) {
            if cqn < NQ {
                self.cq[cqn] = RefCq {
                    set: cq_capacity(log2) != 0,
                    base: base & !63,
                    log2,
                    pi: 0,
                    ci: 0,
                    phase: true,
                    err: false,
                };
            }
        }
        fn doorbell(&mut self, cqn: usize, ci: u16) {
            if cqn < NQ {
                self.cq[cqn].ci = ci;
            }
        }
        /// (beat address, strobe, CQE) of the write, or None: overflow.
        fn commit(&mut self, cqn: usize, c: Cqe) -> Option<(u64, u64, Cqe)> {
            if cqn >= NQ || !self.cq[cqn].set {
                return None;
            }
            let q = &mut self.cq[cqn];
            let full = q.pi.wrapping_sub(q.ci) as u64 == cq_capacity(q.log2);
            if q.err || full {
                q.err = true;
                return None;
            }
            let entries = 1u64 << q.log2;
            let slot = q.pi as u64 & (entries - 1);
            let addr = q.base + (CQE_BYTES as u64) * slot;
            assert!(addr >= q.base && addr + 32 <= q.base + 32 * entries);
            let cqe = Cqe { phase: q.phase, ..c };
            q.pi = q.pi.wrapping_add(1);
            if slot == entries - 1 {
                q.phase = !q.phase;
            }
            Some((addr & !63, 0xFFFF_FFFFu64 << (addr & 32), cqe))
        }
    }

    /// One cycle's stimulus.
    #[derive(Clone, Copy, Default)]
    struct In {
        setup: Option<(usize, u64, usize)>,
        db: Option<(usize, u16)>,
        cq: Option<(usize, Cqe)>,
        wr_ready: bool,
    }

    /// The DUT, the reference model, host memory, and every check on the DUT's outputs.
    struct Bench {
        u: Gen,
        m: Model,
        mem: HashMap<u64, u8>,
        cycle: u64,
        /// accepted completions, committing 2 cycles after their accept
        pipe: VecDeque<(u64, usize, Cqe)>,
        /// the doorbell of the previous cycle (effective now) unless a setup of its CQ killed it
        db_prev: Option<(usize, u16)>,
        want_wr: VecDeque<(u64, u64, Cqe)>,
        want_ovf: VecDeque<usize>,
        /// CQEs committed per CQ (for the driver), and the setups seen (to reset the driver)
        committed: Vec<(usize, Cqe)>,
        writes: u64,
        ovfs: u64,
        accepts: u64,
        b2b_same: u64,
        last_accept: Option<(u64, usize)>,
        /// (cycle, cqn) of the setups and of the effective doorbells, for the forwarding coverage
        su_hist: VecDeque<(u64, usize)>,
        db_hist: VecDeque<(u64, usize)>,
        /// completions that met a setup / a doorbell of their CQ in their S0 or S1 cycle
        cov_su: [u64; 2],
        cov_db: [u64; 2],
        /// cycles cq_ready has been low in a row, and the cycles it was low for FIFO room (3 or more in a row)
        ready_low: u64,
        room_stalls: u64,
    }

    impl Bench {
        fn new() -> Self {
            let mut u = Gen::default();
            u.connect_all();
            Bench {
                u,
                m: Model::new(),
                mem: HashMap::new(),
                cycle: 0,
                pipe: VecDeque::new(),
                db_prev: None,
                want_wr: VecDeque::new(),
                want_ovf: VecDeque::new(),
                committed: Vec::new(),
                writes: 0,
                ovfs: 0,
                accepts: 0,
                b2b_same: 0,
                last_accept: None,
                su_hist: VecDeque::new(),
                db_hist: VecDeque::new(),
                cov_su: [0; 2],
                cov_db: [0; 2],
                ready_low: 0,
                room_stalls: 0,
            }
        }

        /// Run one cycle; returns whether the completion offered was accepted.
        fn step(&mut self, i: &In) -> bool {
            let u = &mut self.u;
            let (sv, sq, sb, sl) = i.setup.map_or((false, 0, 0, 0), |(q, b, l)| (true, q, b, l));
            u.setup_valid.next = sv;
            u.setup_cqn.next = bits(sq as u64);
            u.setup_base.next = bits(sb);
            u.setup_log2.next = bits(sl as u64);
            let (dv, dq, dc) = i.db.map_or((false, 0, 0), |(q, c)| (true, q, c));
            u.ci_valid.next = dv;
            u.ci_cqn.next = bits(dq as u64);
            u.ci_value.next = bits(dc as u64);
            let (cv, cq, c) = i.cq.map_or((false, 0, Cqe::default()), |(q, c)| (true, q, c));
            u.cq.valid.next = cv;
            u.cq.wc.next.cqn = bits(cq as u64);
            u.cq.wc.next.wr_id = bits(c.wr_id);
            u.cq.wc.next.byte_len = bits(c.byte_len as u64);
            u.cq.wc.next.imm = bits(cqe_imm_field(&c) as u64);
            u.cq.wc.next.qp_num = bits(c.qp_num as u64);
            u.cq.wc.next.src_qp = bits(c.src_qp as u64);
            u.cq.wc.next.status = bits(c.status as u64);
            u.cq.wc.next.opcode = bits(c.opcode as u64);
            u.cq.wc.next.wc_flags = bits(c.wc_flags as u64);
            u.dma.ready.next = i.wr_ready;
            u.clock.next = false.into();
            assert!(simulate(u, 100));
            let t = self.cycle;
            // DMA write port
            if u.dma.valid.val() && i.wr_ready {
                let addr = u.dma.addr.val().to_u64();
                let strb = u.dma.strb.val().to_u64();
                let data = u.dma.data.val();
                let (wa, ws, wc) = self.want_wr.pop_front().unwrap_or_else(|| panic!("cycle {t}: unexpected write"));
                assert_eq!(addr, wa, "cycle {t}: address");
                assert_eq!(strb, ws, "cycle {t}: strobe: exactly the 32 bytes of the slot");
                let mut cqe = [0u8; CQE_BYTES];
                for j in 0..64usize {
                    let byte = data.get_bits::<8>(8 * j).to_u64() as u8;
                    if strb >> j & 1 == 1 {
                        self.mem.insert(addr + j as u64, byte);
                        cqe[j % CQE_BYTES] = byte;
                    }
                }
                assert_eq!(Cqe::decode(&cqe), wc, "cycle {t}: CQE decoded from the written bytes");
                assert_eq!(cqe, wc.encode(), "cycle {t}: CQE bytes");
                self.writes += 1;
            }
            if u.ovf_valid.val() {
                let q = self.want_ovf.pop_front().unwrap_or_else(|| panic!("cycle {t}: unexpected overflow"));
                assert_eq!(u.ovf_cqn.val().to_u64(), q as u64, "cycle {t}: overflow cqn");
                self.ovfs += 1;
            }
            let accepted = cv && u.cq.ready.val();
            self.ready_low = if u.cq.ready.val() { 0 } else { self.ready_low + 1 };
            self.room_stalls += (self.ready_low >= 3) as u64;
            if accepted {
                self.pipe.push_back((t, cq, c));
                self.accepts += 1;
                if self.last_accept.is_some_and(|(lt, lq)| lt + 2 == t && lq == cq) {
                    self.b2b_same += 1;
                }
                self.last_accept = Some((t, cq));
            }
            // reference, in the DUT's order: commit, then last cycle's doorbell, then this cycle's setup
            if self.pipe.front().is_some_and(|p| p.0 + 2 == t) {
                let (a, q, c) = self.pipe.pop_front().unwrap();
                for (k, at) in [a, a + 1].into_iter().enumerate() {
                    self.cov_su[k] += self.su_hist.iter().any(|&(ct, cq)| ct == at && cq == q) as u64;
                    self.cov_db[k] += self.db_hist.iter().any(|&(ct, cq)| ct == at && cq == q) as u64;
                }
                match self.m.commit(q, c) {
                    Some(w) => {
                        self.committed.push((q, w.2));
                        self.want_wr.push_back(w);
                    }
                    None => self.want_ovf.push_back(q),
                }
            }
            if let Some((q, ci)) = self.db_prev.take() {
                self.m.doorbell(q, ci);
                self.db_hist.push_back((t, q));
            }
            if let Some((q, b, l)) = i.setup {
                self.m.setup(q, b, l);
                self.su_hist.push_back((t, q));
            }
            self.su_hist.retain(|h| h.0 + 4 > t);
            self.db_hist.retain(|h| h.0 + 4 > t);
            self.db_prev = i.db.filter(|&(q, _)| i.setup.map_or(true, |(sq, _, _)| sq != q || q >= NQ));
            u.clock.next = true.into();
            assert!(simulate(u, 100));
            self.cycle += 1;
            accepted
        }

        fn read_cqe(&self, addr: u64) -> Cqe {
            let mut b = [0u8; CQE_BYTES];
            for (j, x) in b.iter_mut().enumerate() {
                *x = *self.mem.get(&(addr + j as u64)).unwrap_or(&0);
            }
            Cqe::decode(&b)
        }
    }

    /// The driver's view of one CQ (a real driver: it finds new CQEs by their phase bit).
    #[derive(Clone, Debug, Default)]
    struct Drv {
        base: u64,
        log2: usize,
        /// CQEs consumed since the setup (the consumer index, unwrapped)
        count: u64,
        consuming: bool,
        db_pending: bool,
        /// committed, not yet consumed, in order
        expect: VecDeque<Cqe>,
        errored: bool,
    }

    /// Random completions over several CQs of different sizes, a driver consuming by phase and ringing the
    /// CQ doorbell, CQs that stop consuming and overflow, recovery by a new setup, setups and doorbells of
    /// the same CQ in one cycle, random DMA backpressure. Every write is checked against the reference model
    /// (address, strobe, bytes) and every CQE the driver reads against what was sent, in order per CQ.
    #[test]
    fn random_completions_with_a_phase_driven_driver() {
        let mut rng = SmallRng::seed_from_u64(0xC0E);
        let mut b = Bench::new();
        // CQ sizes: 14 is never set up, 15 gets an invalid log2; 4 is the 2^16-entry ring
        let sizes = [1usize, 2, 3, 4, 16, 6, 2, 1, 5, 3, 2, 8, 1, 4, 0, 17];
        let mut drv: Vec<Drv> = vec![Drv::default(); NQ];
        let mut next_base = 0x1_0000_0000u64 - 64 * 40; // rings straddle a 4 GiB boundary too
        let mut alloc = |log2: usize| {
            let b = next_base;
            next_base += (32u64 << log2.min(16)).max(64) + 64 * rng.gen_range(0..4u64);
            b
        };
        let mut setups: VecDeque<(usize, u64, usize)> =
            (0..NQ).filter(|&q| q != 14).map(|q| (q, alloc(sizes[q]), sizes[q])).collect();
        let mut rng = SmallRng::seed_from_u64(0xC0E1);
        let mut held: Option<(usize, Cqe)> = None;
        let mut committed_seen = 0usize;
        let (mut killed, mut resets) = (0u64, 0u64);
        let mut wraps = [0u64; NQ];
        let cycles = 24_000u64;
        for cycle in 0..cycles + 3000 {
            let draining = cycle >= cycles;
            // driver: consume new CQEs (phase), queue doorbells
            for q in 0..NQ {
                let d = &mut drv[q];
                if !d.consuming && !draining || d.errored || d.log2 == 0 || !rng.gen_ratio(2, 3) {
                    continue;
                }
                let entries = 1u64 << d.log2;
                let slot = d.count & (entries - 1);
                let c = b.read_cqe(d.base + 32 * slot);
                let want_phase = (d.count >> d.log2) & 1 == 0;
                if c.phase == want_phase {
                    let e = d.expect.pop_front().unwrap_or_else(|| panic!("cycle {cycle}: CQ {q}: a CQE nobody sent"));
                    assert_eq!(c, e, "cycle {cycle}: CQ {q} slot {slot}");
                    d.count += 1;
                    if d.count % entries == 0 {
                        wraps[q] += 1;
                    }
                    d.db_pending = true;
                }
            }
            for d in drv.iter_mut() {
                if rng.gen_ratio(1, 500) {
                    d.consuming = !d.consuming;
                }
            }
            // DMA backpressure: random, and a long stall now and then (fills the output FIFO)
            let stalled = cycle % 1000 < 60;
            let mut i = In { wr_ready: !stalled && rng.gen_ratio(3, 4), ..Default::default() };
            // doorbell: a pending CQ, sometimes a stray one (ignored: out of range)
            let pend: Vec<usize> = (0..NQ).filter(|&q| drv[q].db_pending).collect();
            if !pend.is_empty() && rng.gen_ratio(1, 2) {
                let q = pend[rng.gen_range(0..pend.len())];
                drv[q].db_pending = false;
                i.db = Some((q, drv[q].count as u16));
            } else if rng.gen_ratio(1, 200) {
                i.db = Some((NQ + rng.gen_range(0..NQ), rng.gen()));
            }
            // setups: the initial ones, recovery of a CQ in error, a re-setup of a live CQ, stray ones
            if let Some(s) = setups.pop_front() {
                i.setup = Some(s);
            } else if !draining {
                let errored: Vec<usize> = (0..NQ).filter(|&q| drv[q].errored).collect();
                if !errored.is_empty() && rng.gen_ratio(1, 60) {
                    let q = errored[rng.gen_range(0..errored.len())];
                    let l = if q == 4 || q == 15 { sizes[q] } else { rng.gen_range(1..7) };
                    i.setup = Some((q, alloc(l), l));
                } else if rng.gen_ratio(1, 300) {
                    // a re-setup of a live CQ (often the one of the completion offered, so that it meets
                    // completions in flight), sometimes with a doorbell of that CQ in the same cycle
                    let q = match held {
                        Some((hq, _)) if hq < NQ - 2 && rng.gen_ratio(1, 2) => hq,
                        _ => rng.gen_range(0..NQ - 2),
                    };
                    i.setup = Some((q, alloc(sizes[q]), sizes[q]));
                    if rng.gen_ratio(1, 2) {
                        i.db = Some((q, drv[q].count as u16));
                    }
                } else if rng.gen_ratio(1, 800) {
                    i.setup = Some((NQ + rng.gen_range(0..NQ), 0xDEAD_0000, 1));
                }
            }
            if let (Some((dq, _)), Some((sq, _, _))) = (i.db, i.setup) {
                if dq == sq {
                    killed += 1;
                }
            }
            // completion: held until accepted
            if held.is_none() && !draining && rng.gen_ratio(7, 8) {
                let q = match rng.gen_range(0..40) {
                    0 => NQ + rng.gen_range(0..NQ),
                    1 => 0xFF_FFFF,
                    2..=4 => rng.gen_range(9..NQ),
                    5..=20 => [0usize, 1, 2, 3][rng.gen_range(0..4)],
                    _ => rng.gen_range(0..9),
                };
                held = Some((q, random_cqe(&mut rng)));
            }
            i.cq = held;
            if b.step(&i) {
                held = None;
            }
            // the driver learns of the CQEs committed (in order; a commit in the cycle of a setup of its CQ
            // belongs to the old ring), then of the setup it made
            while committed_seen < b.committed.len() {
                let (q, c) = b.committed[committed_seen];
                drv[q].expect.push_back(c);
                committed_seen += 1;
            }
            if let Some((q, base, l)) = i.setup {
                if q < NQ {
                    drv[q] = Drv {
                        base: base & !63,
                        log2: if cq_capacity(l) == 0 { 0 } else { l },
                        consuming: true,
                        ..Default::default()
                    };
                    resets += 1;
                }
            }
            for q in 0..NQ {
                if b.m.cq[q].err && b.m.cq[q].set {
                    drv[q].errored = true;
                }
            }
        }
        assert!(b.want_wr.is_empty() && b.want_ovf.is_empty() && b.pipe.is_empty(), "everything came out");
        for q in 0..NQ {
            if !drv[q].errored {
                assert!(drv[q].expect.is_empty(), "CQ {q}: {} CQEs never seen by the driver", drv[q].expect.len());
            }
        }
        assert_eq!(b.u.ovf_count.val().to_u64(), b.ovfs);
        assert_eq!(b.u.cqe_count.val().to_u64(), b.writes);
        eprintln!(
            "accepts {}, writes {}, overflows {}, back-to-back same CQ {}, setups {resets}, doorbells killed by a \
             setup {killed}, completions meeting a setup in S0/S1 {:?}, a doorbell in S0/S1 {:?}, ring wraps {wraps:?}, \
             cycles held back for FIFO room {}",
            b.accepts, b.writes, b.ovfs, b.b2b_same, b.cov_su, b.cov_db, b.room_stalls
        );
        assert!(b.writes > 3000 && b.ovfs > 300 && b.b2b_same > 500 && killed > 5 && resets > 40);
        assert!(b.room_stalls > 500, "the output FIFO filled up and held completions back");
        assert!(b.cov_su.iter().chain(b.cov_db.iter()).all(|&n| n > 5), "every forwarding path exercised");
        assert!(wraps[..4].iter().all(|&w| w >= 3), "several wraps of the small rings");
    }

    /// A completion offered every cycle, the DMA port always ready: one CQE every 2 cycles, all to one CQ
    /// (back to back through the write-back forwarding), in order, no overflow.
    #[test]
    fn sustains_one_cqe_every_two_cycles() {
        let mut rng = SmallRng::seed_from_u64(2);
        let mut b = Bench::new();
        b.step(&In { setup: Some((3, 0x7_0000_0040, 16)), wr_ready: true, ..Default::default() });
        let mut held = random_cqe(&mut rng);
        let n = 4000u64;
        for _ in 0..n {
            if b.step(&In { cq: Some((3, held)), wr_ready: true, ..Default::default() }) {
                held = random_cqe(&mut rng);
            }
        }
        for _ in 0..12 {
            b.step(&In { wr_ready: true, ..Default::default() });
        }
        assert!(b.accepts >= n / 2 - 1, "{} accepts in {n} cycles", b.accepts);
        assert_eq!(b.b2b_same, b.accepts - 1);
        assert_eq!((b.writes, b.ovfs), (b.accepts, 0));
        assert!(b.want_wr.is_empty());
    }

    /// The capacity rule at the edges, for any ci: a 2^16-entry ring holds 2^16 - 1 (its 16-bit indices cannot
    /// tell full from empty); an 8-entry ring overflows at (pi - ci) mod 2^16 == 8, also when the doorbell is
    /// ahead of pi; a ring in error stays in error until a setup; a setup with log2 0 or 17 is no ring.
    #[test]
    fn capacity_edges() {
        let mut b = Bench::new();
        let idle = In { wr_ready: true, ..Default::default() };
        let c = Cqe { wr_id: 1, ..Default::default() };
        let run = |b: &mut Bench, i: In| {
            let mut i = i;
            i.wr_ready = true;
            let mut tries = 0;
            while !b.step(&i) && i.cq.is_some() {
                tries += 1;
                assert!(tries < 4, "a completion is accepted within 2 cycles when the DMA port is idle");
            }
            for _ in 0..8 {
                b.step(&idle);
            }
        };
        run(&mut b, In { setup: Some((0, 0x10_0000, 16)), ..idle });
        run(&mut b, In { setup: Some((1, 0x20_0000, 3)), ..idle });
        run(&mut b, In { setup: Some((2, 0x30_0000, 0)), ..idle });
        run(&mut b, In { setup: Some((5, 0x40_0000, 17)), ..idle });
        // ci = 2 before any CQE: (0 - 2) mod 2^16 = 0xFFFE < 0xFFFF: one write, then full
        run(&mut b, In { db: Some((0, 2)), ..idle });
        run(&mut b, In { cq: Some((0, c)), ..idle });
        assert_eq!((b.writes, b.ovfs), (1, 0));
        run(&mut b, In { cq: Some((0, c)), ..idle });
        assert_eq!((b.writes, b.ovfs), (1, 1));
        // in error until a setup, whatever the doorbell says
        run(&mut b, In { db: Some((0, 1)), ..idle });
        run(&mut b, In { cq: Some((0, c)), ..idle });
        assert_eq!((b.writes, b.ovfs), (1, 2));
        run(&mut b, In { setup: Some((0, 0x10_0000, 16)), ..idle });
        run(&mut b, In { cq: Some((0, c)), ..idle });
        assert_eq!((b.writes, b.ovfs), (2, 2));
        // 8 entries: a doorbell ahead of pi (ci = 0xFFF8 = pi - 8) is a full ring at once
        run(&mut b, In { db: Some((1, 0xFFF8)), ..idle });
        run(&mut b, In { cq: Some((1, c)), ..idle });
        assert_eq!((b.writes, b.ovfs), (2, 3));
        run(&mut b, In { setup: Some((1, 0x20_0000, 3)), ..idle });
        for k in 0..8 {
            run(&mut b, In { cq: Some((1, c)), ..idle });
            assert_eq!((b.writes, b.ovfs), (3 + k, 3));
        }
        run(&mut b, In { cq: Some((1, c)), ..idle });
        assert_eq!((b.writes, b.ovfs), (10, 4));
        // not set up: log2 0 and 17, CQ 9 never, CQ 16 out of range (aliases CQ 0's RAM index)
        for q in [2, 5, 9, NQ] {
            run(&mut b, In { cq: Some((q, c)), ..idle });
        }
        assert_eq!((b.writes, b.ovfs), (10, 8));
        run(&mut b, In { cq: Some((0, c)), ..idle });
        assert_eq!((b.writes, b.ovfs), (11, 8), "CQ 0 untouched by the out-of-range completion");
        assert!(b.want_wr.is_empty() && b.want_ovf.is_empty());
        assert_eq!((b.u.cqe_count.val().to_u64(), b.u.ovf_count.val().to_u64()), (11, 8));
    }
}
