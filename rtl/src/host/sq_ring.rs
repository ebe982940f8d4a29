//! Send Queue Ring and WQE Prefetch: per-QP send-queue rings in host memory, doorbells, and the DMA reads that
//! bring the posted 64-byte slots in, round robin over the QPs with work.
//!
//! **Per-QP state** (`N` QPs, `AW` address bits, `N <= 2^AW <= 2^16`), one RAM per writer's field
//! ([`SdpRam`], registered read): the configuration ([`RingCfg`]: ring base, a 64-byte aligned host address
//! whose low 6 bits are ignored, and log2 entries, 1..15, 0 = no ring), the producer index `pi` (16 bits, the
//! driver's, from the SQ doorbell), the fetch index (16 bits, the next slot to read) and the 1-bit `queued`
//! flag. Indices are free-running modulo 2^16; the slot of index i is `i & (2^log2 - 1)`.
//!
//! **Ports.**
//! - Set-up (`CMD_WRITE_SQ`): `setup_valid`/`setup_ready`, `setup_qpn`, `setup_base`, `setup_log2`: sets base
//!   and size and resets both indices to 0. `setup_log2` = 0 disables the ring (its doorbells are then
//!   ignored); a QPN >= N is ignored. `setup_ready` is low only while one set-up waits for the engine to be
//!   idle (at most 7 cycles plus any wait on `rd_req_ready`); a command engine that issues one command per 17
//!   register writes never sees it low, but should honour it. Set up a ring only while its QP is quiet: slots
//!   of the old ring already requested are still delivered.
//! - SQ doorbell: `db_valid`/`db_ready`, `db_qpn`, `db_pi` (the driver's new producer index). A doorbell is
//!   *ignored* (no state change, one `db_ignored` pulse) when the QPN is >= N, the QP has no enabled ring, it
//!   does not advance (`db_pi == fetch`), or it claims more than the ring holds (`db_pi - fetch > 2^log2`: a
//!   driver bug such as a producer index going backwards). The verdict of a doorbell (its `db_ignored` pulse)
//!   is out no later than the cycle the next doorbell is accepted.
//! - Rewind (go-back-N, from WQE Check): `rw_valid`/`rw_ready`, `rw_qpn`, `rw_idx`: the QP's fetch index goes
//!   back to `rw_idx` (its oldest incomplete WQE) and the QP is scheduled, so its slots are read from host
//!   memory again; the QP's rewind generation (4 bits, per QP) goes up by one. Every slot carries the
//!   generation of its QP when its read was requested (`wqe_gen`), so the consumer can drop slots that were
//!   already on their way before the rewind. A rewind is taken before doorbells and services.
//! - DMA read request: `rd_req_valid`/`rd_req_ready`, `rd_req_addr` (64-byte aligned), `rd_req_len` (bytes, a
//!   multiple of 64, 64..64*[`MAX_BURST`]), `rd_req_tag` (8 bits, one more per request, wrapping). A request
//!   never crosses the ring end; it may cross a 4 KiB boundary (the AXI4 master adapter splits those).
//! - DMA read response: `rd_resp_valid`/`rd_resp_ready`, `rd_resp_data` (one 64-byte beat, byte k in bits
//!   8k+7:8k), `rd_resp_tag`, `rd_resp_last`. **Port contract:** responses come back in request order, each
//!   request as `len / 64` beats, `rd_resp_last` on its final beat, each beat carrying the request's tag. The
//!   tag and `last` are only checked: a beat with the wrong tag, a misplaced `last` or a beat nobody asked for
//!   gives a `dma_err` pulse (a beat is placed by the count; an unasked-for beat is dropped). `rd_resp_ready`
//!   stays high (see flow control): the DMA engine never has to hold a response.
//! - WQE output: `wqe_valid`/`wqe_ready`, `wqe_qpn`, `wqe_idx` (the 16-bit ring index of this slot),
//!   `wqe_data` (the raw 64-byte slot exactly as in host memory, byte k in bits 8k+7:8k). One slot per
//!   transfer, per QP in ring order. Multi-slot WQEs (inline data, the masked-atomic mask slot:
//!   `rnic_driver::host::SendWqe::slots`) are passed through slot by slot: the consumer reassembles them. No
//!   read crosses an aligned group of 8 slots, so a WQE the driver keeps inside one group (an inline WQE and
//!   its data slots, `docs/host-interface.md`) comes out with its slots together, no other QP's between. The
//!   consumer index goes back to the driver through CQEs (the completer), not through this block.
//!
//! **Engine.** One operation at a time through a short state machine, so every read-modify-write of the
//! per-QP RAMs is complete before the next operation reads them (no hazards, no forwarding). In Idle: a
//! waiting set-up is written (one cycle, no read); else a doorbell or a service of the QP at the head of the
//! scheduled-QP FIFO starts, alternating when both want the engine (neither starves). Doorbell (5 cycles:
//! Idle, Read, Calc1, Calc2, Issue): one that moves `pi` past `fetch` stores `pi` and, unless the QP's
//! `queued` bit is set, puts the QP in the scheduled-QP FIFO and sets the bit, so each QP is in the FIFO at
//! most once. Service (7 cycles: Idle, Read, Calc1..4, Issue, plus the wait for `rd_req_ready`): pops the
//! head, issues one DMA read of n = min(pi - fetch, slots to the end of the fetch index's aligned group of
//! [`MAX_BURST`] slots (or to the ring end, for a ring of fewer slots)) slots at
//! `base + (fetch & mask) * 64`, advances `fetch` by n and puts the QP back at the tail if work remains (else
//! clears `queued`): round robin, so between two services of a QP with work every other QP is served at most
//! once. A service that finds no work (a ring set up again while queued) just clears `queued`.
//! **Direct service:** a doorbell that moves `pi` for a QP that is not queued, while no other QP waits and
//! the credits allow a burst, services the QP itself: after its verdict (Calc2) it goes on through Calc3 and
//! Calc4 (the burst and its address, counted against the new `pi`) and at Issue writes `pi` and issues the
//! read as a service does (the QP queued only if work remains): 6 cycles from doorbell to read instead of
//! 5 + 7 (test `a_doorbell_on_an_idle_queue_issues_its_read_itself`).
//! Throughput: one doorbell per 5 cycles (6 with a direct service), one service (up to 8 slots) per 7; a
//! driver that rings once per one-slot WQE on an idle queue gets a WQE per 7 cycles, batched doorbells up to
//! 8 slots per 7 cycles.
//!
//! **Flow control by credits.** `used` counts the beats requested and not yet taken from the WQE output FIFO
//! ([`OUT_DEPTH`] = 32 entries); a service starts only when `used <= OUT_DEPTH - MAX_BURST`, so every beat
//! ever requested has a place and the response channel is never back-pressured. (`used` takes requests and
//! pops one cycle late through registers; the check counts a request at once and a pop late, conservatively.)
//!
//! **Response path.** A FIFO of the reads in flight (QPN, first index, beats, tag) labels the beats in order;
//! a register stage computes the beat's ring index; the WQE output FIFO is show-ahead LUTRAM.
//!
//! **Timing** (322 MHz, <= 6 LUT6 levels): no adder is wider than 9 bits. The RAM words are registered
//! (Read) before any arithmetic. `pi - fetch` and `db_pi - fetch - 1` are carry-select pairs (9-bit low
//! half with its borrow, both candidates for the high byte) in Calc1, picked in Calc2; the slots to the
//! group end are `((mask & 7) & !fetch) + 1`, without an adder; the doorbell's overrun test is
//! `(db_pi - fetch - 1) & !mask != 0`. The slot address `base + (slot << 6)` goes through
//! [`PipeAdd64`] (8-bit slices, 3 stages, Calc1 to Calc4). `fetch + n` is a 9-bit sum in Calc4 whose carry
//! picks `fetch_hi` or the precomputed `fetch_hi + 1` at Issue; a beat's ring index is built the same way.

use crate::common::fifo::{DistRam, Fifo, SdpRam};
use crate::transport::key_cache::PipeAdd64;
use rust_hdl::prelude::*;

use crate::common::ports::DmaRead;

/// Most slots fetched by one DMA read.
pub const MAX_BURST: usize = 8;
/// Entries of the WQE output FIFO (the credit pool).
pub const OUT_DEPTH: usize = 32;

/// A ring's configuration word: base address bits 63:6 and log2 entries (0: no ring).
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct RingCfg {
    pub base: Bits<58>,
    pub log2: Bits<4>,
}

/// One slot in the WQE output FIFO.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct WqeSlot {
    pub data: Bits<512>,
    pub qpn: Bits<16>,
    pub idx: Bits<16>,
    pub gen: Bits<4>,
}

/// One DMA read in flight: its QP, the ring index of its first slot, its beats - 1, its tag.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct InflightRead {
    pub qpn: Bits<16>,
    pub idx: Bits<16>,
    pub last_off: Bits<3>,
    pub tag: Bits<8>,
    /// The QP's rewind generation when the read was requested.
    pub gen: Bits<4>,
}

#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
enum SqState {
    Idle,
    Read,
    Calc1,
    Calc2,
    Calc3,
    Calc4,
    Issue,
}

/// Send Queue Ring and WQE Prefetch for `N` QPs (`AW` address bits); see the module documentation.
#[derive(LogicBlock)]
pub struct SqRing<const N: usize, const AW: usize> {
    pub clock: Signal<In, Clock>,
    // ring set-up (CMD_WRITE_SQ)
    pub setup_valid: Signal<In, Bit>,
    pub setup_ready: Signal<Out, Bit>,
    pub setup_qpn: Signal<In, Bits<24>>,
    pub setup_base: Signal<In, Bits<64>>,
    pub setup_log2: Signal<In, Bits<4>>,
    // SQ doorbell
    pub db_valid: Signal<In, Bit>,
    pub db_ready: Signal<Out, Bit>,
    pub db_qpn: Signal<In, Bits<24>>,
    pub db_pi: Signal<In, Bits<16>>,
    /// Go-back-N rewind (from WQE Check): the QP's fetch index goes back to `rw_idx` (the oldest incomplete
    /// WQE), so that its slots are read from host memory again; the QP is scheduled unless it is queued.
    pub rw_valid: Signal<In, Bit>,
    pub rw_ready: Signal<Out, Bit>,
    pub rw_qpn: Signal<In, Bits<24>>,
    pub rw_idx: Signal<In, Bits<16>>,
    // DMA read request
    pub dma: DmaRead,
    // WQE slots out
    pub wqe_valid: Signal<Out, Bit>,
    pub wqe_ready: Signal<In, Bit>,
    pub wqe_qpn: Signal<Out, Bits<24>>,
    pub wqe_idx: Signal<Out, Bits<16>>,
    /// The QP's rewind generation when this slot was requested: one more per rewind (wrapping), so that the
    /// consumer can drop the slots read before a rewind.
    pub wqe_gen: Signal<Out, Bits<4>>,
    pub wqe_data: Signal<Out, Bits<512>>,
    // events (one-cycle pulses)
    pub db_ignored: Signal<Out, Bit>,
    pub dma_err: Signal<Out, Bit>,
    // per-QP RAMs
    ram_cfg: SdpRam<RingCfg, AW>,
    ram_pi: SdpRam<Bits<16>, AW>,
    ram_fetch: SdpRam<Bits<16>, AW>,
    /// Rewind generation per QP (only rewinds write it: one more each).
    ram_gen: SdpRam<Bits<4>, AW>,
    ram_queued: SdpRam<Bit, AW>,
    // scheduled-QP FIFO (each QP at most once, so it never overflows)
    sch_ram: DistRam<Bits<AW>, AW>,
    sch_w: DFF<Bits<AW>>,
    sch_r: DFF<Bits<AW>>,
    sch_ne: DFF<Bit>,
    // a set-up waiting for Idle
    su_pend: DFF<Bit>,
    su_ok: DFF<Bit>,
    su_qpn: DFF<Bits<AW>>,
    su_base: DFF<Bits<58>>,
    su_log2: DFF<Bits<4>>,
    // the operation
    state: DFF<SqState>,
    last_db: DFF<Bit>,
    /// This doorbell also services its QP (direct service, below).
    dsv: DFF<Bit>,
    /// A read is issued this cycle (Issue of a service or a direct service).
    l_fire: Signal<Local, Bit>,
    op_db: DFF<Bit>,
    /// The doorbell-shaped operation is a rewind.
    op_rw: DFF<Bit>,
    op_qpn: DFF<Bits<AW>>,
    op_oor: DFF<Bit>,
    op_pi: DFF<Bits<16>>,
    // Read: the RAM words, registered
    r_valid: DFF<Bit>,
    r_base: DFF<Bits<58>>,
    r_mask: DFF<Bits<16>>,
    r_pi: DFF<Bits<16>>,
    r_fetch: DFF<Bits<16>>,
    r_gen: DFF<Bits<4>>,
    r_queued: DFF<Bit>,
    // Calc1: 16-bit differences as carry-select halves, ring-end room, fetch_hi + 1
    c_avl: DFF<Bits<9>>,
    c_avh0: DFF<Bits<8>>,
    c_avh1: DFF<Bits<8>>,
    c_dml: DFF<Bits<9>>,
    c_dmh0: DFF<Bits<8>>,
    c_dmh1: DFF<Bits<8>>,
    c_te: DFF<Bits<4>>,
    c_work: DFF<Bit>,
    c_dbzero: DFF<Bit>,
    c_fh1: DFF<Bits<8>>,
    // Calc2
    c_avail: DFF<Bits<16>>,
    c_cnt: DFF<Bits<4>>,
    c_dbover: DFF<Bit>,
    // Calc3
    c_n: DFF<Bits<4>>,
    // Calc4
    c_fl: DFF<Bits<9>>,
    c_more: DFF<Bit>,
    // the slot address base + (slot << 6), Calc1 to Calc4
    addr: PipeAdd64,
    // credits and tags
    used: DFF<Bits<6>>,
    credit_ok: DFF<Bit>,
    inc_r: DFF<Bits<6>>,
    dec_r: DFF<Bits<6>>,
    tag: DFF<Bits<8>>,
    // response path
    infl: Fifo<InflightRead, 5, 6>,
    beat: DFF<Bits<3>>,
    p_valid: DFF<Bit>,
    p_data: DFF<Bits<512>>,
    p_qpn: DFF<Bits<16>>,
    p_gen: DFF<Bits<4>>,
    p_lo: DFF<Bits<9>>,
    p_hi0: DFF<Bits<8>>,
    p_hi1: DFF<Bits<8>>,
    outq: Fifo<WqeSlot, 5, 6>,
    // event outputs
    ev_ign: DFF<Bit>,
    ev_err: DFF<Bit>,
    // locals
    sch_head: Signal<Local, Bits<AW>>,
    sch_rnext: Signal<Local, Bits<AW>>,
    sch_push: Signal<Local, Bit>,
    sch_pop: Signal<Local, Bit>,
    in_idle: Signal<Local, Bit>,
    su_go: Signal<Local, Bit>,
    su_we: Signal<Local, Bit>,
    rd_log2: Signal<Local, Bits<4>>,
    db_bad: Signal<Local, Bit>,
    can_srv: Signal<Local, Bit>,
    db_go: Signal<Local, Bit>,
    rw_go: Signal<Local, Bit>,
    rw_lo: Signal<Local, Bits<AW>>,
    srv_go: Signal<Local, Bit>,
    db_lo: Signal<Local, Bits<AW>>,
    pi_lo: Signal<Local, Bits<8>>,
    pi_hi: Signal<Local, Bits<8>>,
    fe_lo: Signal<Local, Bits<8>>,
    fe_hi: Signal<Local, Bits<8>>,
    nfe_lo: Signal<Local, Bits<8>>,
    nfe_hi: Signal<Local, Bits<8>>,
    dp_lo: Signal<Local, Bits<8>>,
    dp_hi: Signal<Local, Bits<8>>,
    room: Signal<Local, Bits<16>>,
    room3: Signal<Local, Bits<3>>,
    room3p1: Signal<Local, Bits<3>>,
    avail: Signal<Local, Bits<16>>,
    avl8: Signal<Local, Bits<8>>,
    avh8: Signal<Local, Bits<8>>,
    dm1: Signal<Local, Bits<16>>,
    dml8: Signal<Local, Bits<8>>,
    dmh8: Signal<Local, Bits<8>>,
    slot: Signal<Local, Bits<16>>,
    fetch_new: Signal<Local, Bits<16>>,
    fl8: Signal<Local, Bits<8>>,
    fh8: Signal<Local, Bits<8>>,
    n16: Signal<Local, Bits<16>>,
    n6: Signal<Local, Bits<6>>,
    n9: Signal<Local, Bits<9>>,
    inc6: Signal<Local, Bits<6>>,
    dec6: Signal<Local, Bits<6>>,
    up6: Signal<Local, Bits<6>>,
    h_idx: Signal<Local, Bits<16>>,
    h_ilo: Signal<Local, Bits<8>>,
    h_ihi: Signal<Local, Bits<8>>,
    h_last: Signal<Local, Bits<3>>,
    h_tag: Signal<Local, Bits<8>>,
    beat9: Signal<Local, Bits<9>>,
    p_adv: Signal<Local, Bit>,
    acc: Signal<Local, Bit>,
    beat_last: Signal<Local, Bit>,
    p_lo8: Signal<Local, Bits<8>>,
    o_qpn: Signal<Local, Bits<16>>,
    out_pop: Signal<Local, Bit>,
    // constants
    n_qps: Constant<Bits<24>>,
    one_aw: Constant<Bits<AW>>,
    zero16: Constant<Bits<16>>,
    ones16: Constant<Bits<16>>,
    burst16: Constant<Bits<16>>,
    burst4: Constant<Bits<4>>,
    zero4: Constant<Bits<4>>,
    zero3: Constant<Bits<3>>,
    one3: Constant<Bits<3>>,
    one4: Constant<Bits<4>>,
    seven3: Constant<Bits<3>>,
    one8: Constant<Bits<8>>,
    zero6: Constant<Bits<6>>,
    one6: Constant<Bits<6>>,
    credit_max: Constant<Bits<6>>,
    credit_issue: Constant<Bits<6>>,
}

impl<const N: usize, const AW: usize> Default for SqRing<N, AW> {
    fn default() -> Self {
        assert!(AW <= 16 && N >= 1 && N <= 1 << AW, "N = {N} QPs need N <= 2^AW, AW <= 16");
        assert!(MAX_BURST == 8 && OUT_DEPTH == 32, "beat offsets are 3 bits, the FIFOs 32 deep");
        Self {
            clock: Default::default(),
            setup_valid: Default::default(),
            setup_ready: Default::default(),
            setup_qpn: Default::default(),
            setup_base: Default::default(),
            setup_log2: Default::default(),
            db_valid: Default::default(),
            db_ready: Default::default(),
            db_qpn: Default::default(),
            db_pi: Default::default(),
            rw_valid: Default::default(),
            rw_ready: Default::default(),
            rw_qpn: Default::default(),
            rw_idx: Default::default(),
            dma: Default::default(),
            wqe_valid: Default::default(),
            wqe_ready: Default::default(),
            wqe_qpn: Default::default(),
            wqe_idx: Default::default(),
            wqe_gen: Default::default(),
            wqe_data: Default::default(),
            db_ignored: Default::default(),
            dma_err: Default::default(),
            ram_cfg: Default::default(),
            ram_pi: Default::default(),
            ram_fetch: Default::default(),
            ram_gen: Default::default(),
            ram_queued: Default::default(),
            sch_ram: Default::default(),
            sch_w: Default::default(),
            sch_r: Default::default(),
            sch_ne: Default::default(),
            su_pend: Default::default(),
            su_ok: Default::default(),
            su_qpn: Default::default(),
            su_base: Default::default(),
            su_log2: Default::default(),
            state: Default::default(),
            last_db: Default::default(),
            dsv: Default::default(),
            l_fire: Default::default(),
            op_db: Default::default(),
            op_rw: Default::default(),
            op_qpn: Default::default(),
            op_oor: Default::default(),
            op_pi: Default::default(),
            r_valid: Default::default(),
            r_base: Default::default(),
            r_mask: Default::default(),
            r_pi: Default::default(),
            r_fetch: Default::default(),
            r_gen: Default::default(),
            r_queued: Default::default(),
            c_avl: Default::default(),
            c_avh0: Default::default(),
            c_avh1: Default::default(),
            c_dml: Default::default(),
            c_dmh0: Default::default(),
            c_dmh1: Default::default(),
            c_te: Default::default(),
            c_work: Default::default(),
            c_dbzero: Default::default(),
            c_fh1: Default::default(),
            c_avail: Default::default(),
            c_cnt: Default::default(),
            c_dbover: Default::default(),
            c_n: Default::default(),
            c_fl: Default::default(),
            c_more: Default::default(),
            addr: Default::default(),
            used: Default::default(),
            credit_ok: Default::default(),
            inc_r: Default::default(),
            dec_r: Default::default(),
            tag: Default::default(),
            infl: Default::default(),
            beat: Default::default(),
            p_valid: Default::default(),
            p_data: Default::default(),
            p_qpn: Default::default(),
            p_gen: Default::default(),
            p_lo: Default::default(),
            p_hi0: Default::default(),
            p_hi1: Default::default(),
            outq: Default::default(),
            ev_ign: Default::default(),
            ev_err: Default::default(),
            sch_head: Default::default(),
            sch_rnext: Default::default(),
            sch_push: Default::default(),
            sch_pop: Default::default(),
            in_idle: Default::default(),
            su_go: Default::default(),
            su_we: Default::default(),
            rd_log2: Default::default(),
            db_bad: Default::default(),
            can_srv: Default::default(),
            db_go: Default::default(),
            rw_go: Default::default(),
            rw_lo: Default::default(),
            srv_go: Default::default(),
            db_lo: Default::default(),
            pi_lo: Default::default(),
            pi_hi: Default::default(),
            fe_lo: Default::default(),
            fe_hi: Default::default(),
            nfe_lo: Default::default(),
            nfe_hi: Default::default(),
            dp_lo: Default::default(),
            dp_hi: Default::default(),
            room: Default::default(),
            room3: Default::default(),
            room3p1: Default::default(),
            avail: Default::default(),
            avl8: Default::default(),
            avh8: Default::default(),
            dm1: Default::default(),
            dml8: Default::default(),
            dmh8: Default::default(),
            slot: Default::default(),
            fetch_new: Default::default(),
            fl8: Default::default(),
            fh8: Default::default(),
            n16: Default::default(),
            n6: Default::default(),
            n9: Default::default(),
            inc6: Default::default(),
            dec6: Default::default(),
            up6: Default::default(),
            h_idx: Default::default(),
            h_ilo: Default::default(),
            h_ihi: Default::default(),
            h_last: Default::default(),
            h_tag: Default::default(),
            beat9: Default::default(),
            p_adv: Default::default(),
            acc: Default::default(),
            beat_last: Default::default(),
            p_lo8: Default::default(),
            o_qpn: Default::default(),
            out_pop: Default::default(),
            n_qps: Constant::new(bits::<24>(N as u64)),
            one_aw: Constant::new(bits::<AW>(1)),
            zero16: Constant::new(bits::<16>(0)),
            ones16: Constant::new(bits::<16>(0xFFFF)),
            burst16: Constant::new(bits::<16>(MAX_BURST as u64)),
            burst4: Constant::new(bits::<4>(MAX_BURST as u64)),
            zero4: Constant::new(bits::<4>(0)),
            zero3: Constant::new(bits::<3>(0)),
            one3: Constant::new(bits::<3>(1)),
            one4: Constant::new(bits::<4>(1)),
            seven3: Constant::new(bits::<3>(7)),
            one8: Constant::new(bits::<8>(1)),
            zero6: Constant::new(bits::<6>(0)),
            one6: Constant::new(bits::<6>(1)),
            credit_max: Constant::new(bits::<6>((OUT_DEPTH - MAX_BURST) as u64)),
            credit_issue: Constant::new(bits::<6>((OUT_DEPTH - 2 * MAX_BURST) as u64)),
        }
    }
}

impl<const N: usize, const AW: usize> Logic for SqRing<N, AW> {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, sch_w, sch_r, sch_ne, su_pend, su_ok, su_qpn, su_base, su_log2, state, last_db, dsv,
            op_db, op_rw, op_qpn, op_oor, op_pi, r_valid, r_base, r_mask, r_pi, r_fetch, r_gen, r_queued, c_avl, c_avh0, c_avh1,
            c_dml, c_dmh0, c_dmh1, c_te, c_work, c_dbzero, c_fh1, c_avail, c_cnt, c_dbover, c_n, c_fl,
            c_more, used, credit_ok, inc_r, dec_r, tag, beat, p_valid, p_data, p_qpn, p_gen, p_lo, p_hi0, p_hi1, ev_ign,
            ev_err
        );
        clock!(self, clock, ram_cfg, ram_pi, ram_fetch, ram_gen, ram_queued, sch_ram, addr, infl, outq);

        // ---------------------------------------------------------------- defaults
        self.ev_ign.d.next = false;
        self.ev_err.d.next = false;
        self.dma.req_valid.next = false;
        self.l_fire.next = false;
        self.sch_push.next = false;
        self.sch_pop.next = false;
        self.infl.push.next = false;
        self.inc6.next = self.zero6.val();

        // ---------------------------------------------------------------- scheduled-QP FIFO
        self.sch_ram.raddr.next = self.sch_r.q.val();
        self.sch_head.next = self.sch_ram.rdata.val();
        self.sch_rnext.next = self.sch_r.q.val() + self.one_aw.val();
        self.sch_ram.waddr.next = self.sch_w.q.val();
        self.sch_ram.wdata.next = self.op_qpn.q.val();

        // ---------------------------------------------------------------- set-up capture
        self.setup_ready.next = !self.su_pend.q.val();
        if self.setup_valid.val() & !self.su_pend.q.val() {
            self.su_pend.d.next = true;
            self.su_ok.d.next = self.setup_qpn.val() < self.n_qps.val();
            self.su_qpn.d.next = self.setup_qpn.val().get_bits::<AW>(0);
            self.su_base.d.next = self.setup_base.val().get_bits::<58>(6);
            self.su_log2.d.next = self.setup_log2.val();
        }

        // ---------------------------------------------------------------- Idle: pick the next operation
        self.in_idle.next = self.state.q.val() == SqState::Idle;
        self.su_go.next = self.in_idle.val() & self.su_pend.q.val();
        self.su_we.next = self.su_go.val() & self.su_ok.q.val();
        self.can_srv.next = self.sch_ne.q.val() & self.credit_ok.q.val();
        // a rewind goes first (go-back-N is waiting for it), then doorbells and services alternate
        self.rw_ready.next = self.in_idle.val() & !self.su_pend.q.val();
        self.rw_go.next = self.rw_ready.val() & self.rw_valid.val();
        self.db_ready.next = self.in_idle.val() & !self.su_pend.q.val() & !self.rw_valid.val()
            & (!self.can_srv.val() | !self.last_db.q.val());
        self.db_go.next = self.db_ready.val() & self.db_valid.val();
        self.srv_go.next =
            self.in_idle.val() & !self.su_pend.q.val() & self.can_srv.val() & !self.db_go.val() & !self.rw_valid.val();
        self.db_lo.next = self.db_qpn.val().get_bits::<AW>(0);
        self.rw_lo.next = self.rw_qpn.val().get_bits::<AW>(0);
        if self.su_go.val() {
            self.su_pend.d.next = false;
        }
        if self.rw_go.val() {
            self.state.d.next = SqState::Read;
            self.op_db.d.next = true;
            self.op_rw.d.next = true;
            self.op_qpn.d.next = self.rw_lo.val();
            self.op_oor.d.next = self.rw_qpn.val() >= self.n_qps.val();
            self.op_pi.d.next = self.rw_idx.val();
        }
        if self.in_idle.val() {
            self.dsv.d.next = false;
        }
        if self.db_go.val() {
            self.state.d.next = SqState::Read;
            self.last_db.d.next = true;
            self.op_db.d.next = true;
            self.op_rw.d.next = false;
            self.op_qpn.d.next = self.db_lo.val();
            self.op_oor.d.next = self.db_qpn.val() >= self.n_qps.val();
            self.op_pi.d.next = self.db_pi.val();
        }
        if self.srv_go.val() {
            self.state.d.next = SqState::Read;
            self.last_db.d.next = false;
            self.op_db.d.next = false;
            self.op_rw.d.next = false;
            self.op_qpn.d.next = self.sch_head.val();
            self.op_oor.d.next = false;
            self.sch_pop.next = true;
        }

        // per-QP RAMs: one read address (the operation being started); written by a set-up (Idle) or at Issue
        self.ram_cfg.raddr.next = self.sch_head.val();
        self.ram_pi.raddr.next = self.sch_head.val();
        self.ram_fetch.raddr.next = self.sch_head.val();
        self.ram_gen.raddr.next = self.sch_head.val();
        self.ram_queued.raddr.next = self.sch_head.val();
        if self.db_go.val() {
            self.ram_cfg.raddr.next = self.db_lo.val();
            self.ram_pi.raddr.next = self.db_lo.val();
            self.ram_fetch.raddr.next = self.db_lo.val();
            self.ram_gen.raddr.next = self.db_lo.val();
            self.ram_queued.raddr.next = self.db_lo.val();
        }
        if self.rw_go.val() {
            self.ram_cfg.raddr.next = self.rw_lo.val();
            self.ram_pi.raddr.next = self.rw_lo.val();
            self.ram_fetch.raddr.next = self.rw_lo.val();
            self.ram_gen.raddr.next = self.rw_lo.val();
            self.ram_queued.raddr.next = self.rw_lo.val();
        }
        // the ring set-up is the only writer of the configuration
        self.ram_cfg.waddr.next = self.su_qpn.q.val();
        self.ram_cfg.wdata.next.base = self.su_base.q.val();
        self.ram_cfg.wdata.next.log2 = self.su_log2.q.val();
        self.ram_cfg.we.next = self.su_we.val();
        // indices: a set-up resets both to 0, a doorbell writes pi, a service writes fetch
        self.fl8.next = self.c_fl.q.val().get_bits::<8>(0);
        self.fh8.next = self.r_fetch.q.val().get_bits::<8>(8);
        if self.c_fl.q.val().get_bit(8) {
            self.fh8.next = self.c_fh1.q.val();
        }
        self.fetch_new.next = (bit_cast::<16, 8>(self.fh8.val()) << 8) | bit_cast::<16, 8>(self.fl8.val());
        self.ram_pi.waddr.next = self.op_qpn.q.val();
        self.ram_fetch.waddr.next = self.op_qpn.q.val();
        self.ram_pi.wdata.next = self.op_pi.q.val();
        self.ram_fetch.wdata.next = self.fetch_new.val();
        self.ram_pi.we.next = false;
        self.ram_fetch.we.next = false;
        if self.su_go.val() {
            self.ram_pi.waddr.next = self.su_qpn.q.val();
            self.ram_fetch.waddr.next = self.su_qpn.q.val();
            self.ram_pi.wdata.next = self.zero16.val();
            self.ram_fetch.wdata.next = self.zero16.val();
            self.ram_pi.we.next = self.su_ok.q.val();
            self.ram_fetch.we.next = self.su_ok.q.val();
        }
        self.ram_queued.waddr.next = self.op_qpn.q.val();
        self.ram_queued.wdata.next = false;
        self.ram_queued.we.next = false;
        self.ram_gen.waddr.next = self.op_qpn.q.val();
        self.ram_gen.wdata.next = self.r_gen.q.val() + self.one4.val();
        self.ram_gen.we.next = false;

        // ---------------------------------------------------------------- Read: register the RAM words
        self.rd_log2.next = self.ram_cfg.rdata.val().log2;
        if self.state.q.val() == SqState::Read {
            self.r_valid.d.next = self.rd_log2.val() != self.zero4.val();
            self.r_base.d.next = self.ram_cfg.rdata.val().base;
            self.r_mask.d.next = !(self.ones16.val() << self.rd_log2.val());
            self.r_pi.d.next = self.ram_pi.rdata.val();
            if self.op_db.q.val() & !self.op_rw.q.val() {
                // a doorbell: the work is counted against its new pi (what a service after it would see)
                self.r_pi.d.next = self.op_pi.q.val();
            }
            self.r_fetch.d.next = self.ram_fetch.rdata.val();
            self.r_gen.d.next = self.ram_gen.rdata.val();
            self.r_queued.d.next = self.ram_queued.rdata.val();
        }

        // ---------------------------------------------------------------- Calc1..4, free running on r_* / op_*
        // Calc1. avail = pi - fetch and dm1 = db_pi - fetch - 1 = db_pi + !fetch, each as a 9-bit low half
        // (bit 8: borrow / carry) and both candidates for the high half.
        self.pi_lo.next = self.r_pi.q.val().get_bits::<8>(0);
        self.pi_hi.next = self.r_pi.q.val().get_bits::<8>(8);
        self.fe_lo.next = self.r_fetch.q.val().get_bits::<8>(0);
        self.fe_hi.next = self.r_fetch.q.val().get_bits::<8>(8);
        self.nfe_lo.next = !self.fe_lo.val();
        self.nfe_hi.next = !self.fe_hi.val();
        self.dp_lo.next = self.op_pi.q.val().get_bits::<8>(0);
        self.dp_hi.next = self.op_pi.q.val().get_bits::<8>(8);
        self.c_avl.d.next = bit_cast::<9, 8>(self.pi_lo.val()) - bit_cast::<9, 8>(self.fe_lo.val());
        self.c_avh0.d.next = self.pi_hi.val() - self.fe_hi.val();
        self.c_avh1.d.next = self.pi_hi.val() + self.nfe_hi.val();
        self.c_dml.d.next = bit_cast::<9, 8>(self.dp_lo.val()) + bit_cast::<9, 8>(self.nfe_lo.val());
        self.c_dmh0.d.next = self.dp_hi.val() + self.nfe_hi.val();
        self.c_dmh1.d.next = self.dp_hi.val() - self.fe_hi.val();
        // slots to the end of the fetch index's 8-slot group, or to the ring end when the ring is smaller:
        // ((mask & 7) & !fetch) + 1 (1..=8), so no read crosses a group boundary (an inline WQE, which the
        // driver keeps inside one group, comes in one read, its slots together)
        self.room.next = self.r_mask.q.val() & !self.r_fetch.q.val();
        self.room3.next = self.room.val().get_bits::<3>(0);
        self.room3p1.next = self.room3.val() + self.one3.val();
        self.c_te.d.next = bit_cast::<4, 3>(self.room3p1.val());
        if self.room3.val() == self.seven3.val() {
            self.c_te.d.next = self.burst4.val();
        }
        self.c_work.d.next = self.r_valid.q.val() & (self.r_pi.q.val() != self.r_fetch.q.val());
        self.c_dbzero.d.next = self.op_pi.q.val() == self.r_fetch.q.val();
        self.c_fh1.d.next = self.fe_hi.val() + self.one8.val();
        // the slot's address, ready in Calc4
        self.slot.next = self.r_fetch.q.val() & self.r_mask.q.val();
        self.addr.a.next = bit_cast::<64, 58>(self.r_base.q.val()) << 6;
        self.addr.b.next = bit_cast::<64, 16>(self.slot.val()) << 6;
        self.addr.cin.next = false;
        // Calc2
        self.avl8.next = self.c_avl.q.val().get_bits::<8>(0);
        self.avh8.next = self.c_avh0.q.val();
        if self.c_avl.q.val().get_bit(8) {
            self.avh8.next = self.c_avh1.q.val();
        }
        self.avail.next = (bit_cast::<16, 8>(self.avh8.val()) << 8) | bit_cast::<16, 8>(self.avl8.val());
        self.c_avail.d.next = self.avail.val();
        self.c_cnt.d.next = self.avail.val().get_bits::<4>(0);
        if self.avail.val() >= self.burst16.val() {
            self.c_cnt.d.next = self.burst4.val();
        }
        self.dml8.next = self.c_dml.q.val().get_bits::<8>(0);
        self.dmh8.next = self.c_dmh0.q.val();
        if self.c_dml.q.val().get_bit(8) {
            self.dmh8.next = self.c_dmh1.q.val();
        }
        self.dm1.next = (bit_cast::<16, 8>(self.dmh8.val()) << 8) | bit_cast::<16, 8>(self.dml8.val());
        // db_pi - fetch > size  <=>  db_pi - fetch - 1 > mask (the zero case is caught apart)
        self.c_dbover.d.next = (self.dm1.val() & !self.r_mask.q.val()) != self.zero16.val();
        // Calc3
        self.c_n.d.next = self.c_te.q.val();
        if self.c_cnt.q.val() < self.c_te.q.val() {
            self.c_n.d.next = self.c_cnt.q.val();
        }
        // Calc4: fetch + n (low half and its carry; the high half picked at Issue), work left after n
        self.n16.next = bit_cast::<16, 4>(self.c_n.q.val());
        self.n9.next = bit_cast::<9, 4>(self.c_n.q.val());
        self.n6.next = bit_cast::<6, 4>(self.c_n.q.val());
        self.c_fl.d.next = bit_cast::<9, 8>(self.fe_lo.val()) + self.n9.val();
        self.c_more.d.next = self.c_avail.q.val() != self.n16.val();

        // ---------------------------------------------------------------- the state machine
        self.db_bad.next =
            self.c_dbzero.q.val() | self.c_dbover.q.val() | !self.r_valid.q.val() | self.op_oor.q.val();
        match self.state.q.val() {
            SqState::Idle => {}
            SqState::Read => {
                self.state.d.next = SqState::Calc1;
            }
            SqState::Calc1 => {
                self.state.d.next = SqState::Calc2;
            }
            SqState::Calc2 => {
                // a doorbell has its verdict now; one for a QP that is not queued, with no other QP waiting and
                // room for a burst, services the QP itself (direct service: Calc3, Calc4 for the burst and its
                // address, then the read at Issue), 6 cycles from doorbell to read instead of 5 + 7
                self.state.d.next = SqState::Calc3;
                if self.op_db.q.val() {
                    self.state.d.next = SqState::Issue;
                    if !self.op_rw.q.val()
                        & !self.r_queued.q.val()
                        & !self.sch_ne.q.val()
                        & self.credit_ok.q.val()
                        & self.r_valid.q.val()
                        & !self.op_oor.q.val()
                    {
                        self.dsv.d.next = true;
                        self.state.d.next = SqState::Calc3;
                    }
                }
            }
            SqState::Calc3 => {
                self.state.d.next = SqState::Calc4;
            }
            SqState::Calc4 => {
                self.state.d.next = SqState::Issue;
            }
            _ => {
                // Issue
                if self.op_rw.q.val() {
                    // rewind: fetch := rw_idx, and the QP is scheduled to read from there
                    self.state.d.next = SqState::Idle;
                    if self.r_valid.q.val() & !self.op_oor.q.val() {
                        self.ram_fetch.we.next = true;
                        self.ram_fetch.wdata.next = self.op_pi.q.val();
                        self.ram_gen.we.next = true;
                        if !self.r_queued.q.val() {
                            self.sch_push.next = true;
                            self.ram_queued.we.next = true;
                            self.ram_queued.wdata.next = true;
                        }
                    }
                } else if self.op_db.q.val() {
                    self.state.d.next = SqState::Idle;
                    if self.db_bad.val() {
                        self.ev_ign.d.next = true;
                    } else if self.dsv.q.val() {
                        // direct service: pi, and the read of the first burst as a service issues it (pi is
                        // written again while the read waits: the same value)
                        self.ram_pi.we.next = true;
                        self.dma.req_valid.next = true;
                        self.state.d.next = SqState::Issue;
                        self.l_fire.next = self.dma.req_ready.val();
                    } else {
                        self.ram_pi.we.next = true;
                        if !self.r_queued.q.val() {
                            self.sch_push.next = true;
                            self.ram_queued.we.next = true;
                            self.ram_queued.wdata.next = true;
                        }
                    }
                } else if self.c_work.q.val() {
                    self.dma.req_valid.next = true;
                    self.l_fire.next = self.dma.req_ready.val();
                } else {
                    // nothing to fetch (the ring was set up again, or disabled, while the QP was queued)
                    self.state.d.next = SqState::Idle;
                    self.ram_queued.we.next = true;
                }
            }
        }
        // a read issued (a service's or a direct service's): fetch advances; the QP goes (back) to the tail of
        // the scheduled-QP FIFO if work remains (queued set), else queued is cleared
        if self.l_fire.val() {
            self.state.d.next = SqState::Idle;
            self.ram_fetch.we.next = true;
            self.infl.push.next = true;
            self.tag.d.next = self.tag.q.val() + self.one8.val();
            self.inc6.next = self.n6.val();
            self.ram_queued.we.next = true;
            if self.c_more.q.val() {
                self.sch_push.next = true;
                self.ram_queued.wdata.next = true;
            }
        }

        // scheduled-QP FIFO pointers (push only at Issue, pop only in Idle: never both)
        self.sch_ram.we.next = self.sch_push.val();
        if self.sch_push.val() {
            self.sch_w.d.next = self.sch_w.q.val() + self.one_aw.val();
            self.sch_ne.d.next = true;
        }
        if self.sch_pop.val() {
            self.sch_r.d.next = self.sch_rnext.val();
            self.sch_ne.d.next = self.sch_rnext.val() != self.sch_w.q.val();
        }

        // ---------------------------------------------------------------- DMA request
        self.dma.req_addr.next = self.addr.sum.val();
        self.dma.req_len.next = bit_cast::<13, 4>(self.c_n.q.val()) << 6;
        self.dma.req_tag.next = self.tag.q.val();
        self.infl.din.next.qpn = bit_cast::<16, AW>(self.op_qpn.q.val());
        self.infl.din.next.idx = self.r_fetch.q.val();
        self.infl.din.next.last_off = self.c_n.q.val().get_bits::<3>(0) - self.one3.val();
        self.infl.din.next.tag = self.tag.q.val();
        self.infl.din.next.gen = self.r_gen.q.val();

        // ---------------------------------------------------------------- DMA response -> P stage -> WQE FIFO
        self.h_idx.next = self.infl.dout.val().idx;
        self.h_ilo.next = self.h_idx.val().get_bits::<8>(0);
        self.h_ihi.next = self.h_idx.val().get_bits::<8>(8);
        self.h_last.next = self.infl.dout.val().last_off;
        self.h_tag.next = self.infl.dout.val().tag;
        self.beat9.next = bit_cast::<9, 3>(self.beat.q.val());
        self.p_adv.next = !self.p_valid.q.val() | !self.outq.full.val();
        self.dma.resp_ready.next = self.p_adv.val();
        self.acc.next = self.dma.resp_valid.val() & self.p_adv.val();
        self.beat_last.next = self.beat.q.val() == self.h_last.val();
        self.infl.pop.next = false;
        if self.p_adv.val() {
            self.p_valid.d.next = self.acc.val() & !self.infl.empty.val();
            self.p_data.d.next = self.dma.resp_data.val();
            self.p_qpn.d.next = self.infl.dout.val().qpn;
            self.p_gen.d.next = self.infl.dout.val().gen;
            // the slot's ring index = first index + beat, as a carry-select pair
            self.p_lo.d.next = bit_cast::<9, 8>(self.h_ilo.val()) + self.beat9.val();
            self.p_hi0.d.next = self.h_ihi.val();
            self.p_hi1.d.next = self.h_ihi.val() + self.one8.val();
        }
        if self.acc.val() {
            if self.infl.empty.val() {
                self.ev_err.d.next = true;
            } else {
                if (self.dma.resp_tag.val() != self.h_tag.val()) | (self.dma.resp_last.val() != self.beat_last.val()) {
                    self.ev_err.d.next = true;
                }
                if self.beat_last.val() {
                    self.beat.d.next = self.zero3.val();
                    self.infl.pop.next = true;
                } else {
                    self.beat.d.next = self.beat.q.val() + self.one3.val();
                }
            }
        }
        self.p_lo8.next = self.p_lo.q.val().get_bits::<8>(0);
        self.outq.din.next.data = self.p_data.q.val();
        self.outq.din.next.qpn = self.p_qpn.q.val();
        self.outq.din.next.gen = self.p_gen.q.val();
        self.outq.din.next.idx = (bit_cast::<16, 8>(self.p_hi0.q.val()) << 8) | bit_cast::<16, 8>(self.p_lo8.val());
        if self.p_lo.q.val().get_bit(8) {
            self.outq.din.next.idx =
                (bit_cast::<16, 8>(self.p_hi1.q.val()) << 8) | bit_cast::<16, 8>(self.p_lo8.val());
        }
        self.outq.push.next = self.p_valid.q.val() & !self.outq.full.val();

        // ---------------------------------------------------------------- WQE output
        self.wqe_valid.next = !self.outq.empty.val();
        self.wqe_data.next = self.outq.dout.val().data;
        self.o_qpn.next = self.outq.dout.val().qpn;
        self.wqe_qpn.next = bit_cast::<24, 16>(self.o_qpn.val());
        self.wqe_idx.next = self.outq.dout.val().idx;
        self.wqe_gen.next = self.outq.dout.val().gen;
        self.out_pop.next = self.wqe_ready.val() & !self.outq.empty.val();
        self.outq.pop.next = self.out_pop.val();

        // ---------------------------------------------------------------- credits: beats requested, not yet taken
        // A request and a pop enter `used` one cycle late; the check counts the request at once and the pop
        // late (conservative), and while in Issue it also leaves room for the request being made.
        self.dec6.next = self.zero6.val();
        if self.out_pop.val() {
            self.dec6.next = self.one6.val();
        }
        self.inc_r.d.next = self.inc6.val();
        self.dec_r.d.next = self.dec6.val();
        self.used.d.next = self.used.q.val() + self.inc_r.q.val() - self.dec_r.q.val();
        self.up6.next = self.used.q.val() + self.inc_r.q.val();
        self.credit_ok.d.next = self.up6.val() <= self.credit_max.val();
        if self.state.q.val() == SqState::Issue {
            self.credit_ok.d.next = self.up6.val() <= self.credit_issue.val();
        }

        // ---------------------------------------------------------------- events
        self.db_ignored.next = self.ev_ign.q.val();
        self.dma_err.next = self.ev_err.q.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::{HashMap, VecDeque};
    use rnic_driver::host::{
        mask_slot, SendWqe, WQE_BYTES, WQE_EXT, WQE_INLINE, WQE_SIGNALED, WR_MASKED_ATOMIC_CMP_AND_SWP, WR_RDMA_READ,
        WR_RDMA_WRITE, WR_SEND, WR_SEND_WITH_IMM,
    };

    /// 24 QPs on 5 address bits: QPNs 24..31 alias RAM rows and must still be refused.
    const NQ: usize = 24;
    type Dut = SqRing<NQ, 5>;
    type Slot = [u8; WQE_BYTES];

    fn to_bits(b: &Slot) -> Bits<512> {
        let mut x = Bits::<512>::default();
        for i in 0..8 {
            x.set_bits::<64>(64 * i, bits::<64>(u64::from_le_bytes(b[8 * i..8 * i + 8].try_into().unwrap())));
        }
        x
    }

    fn from_bits(x: Bits<512>) -> Slot {
        let mut b = [0u8; WQE_BYTES];
        for i in 0..8 {
            b[8 * i..8 * i + 8].copy_from_slice(&x.get_bits::<64>(64 * i).to_u64().to_le_bytes());
        }
        b
    }

    #[derive(Clone, Copy, Debug)]
    struct Ring {
        qpn: u32,
        base: u64,
        log2: u8,
    }

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Fault {
        None,
        /// The 20th request's first beat carries the bytes of the next slot: the checker must panic.
        WrongData,
        /// The 20th request's first beat carries a wrong tag: `dma_err` must pulse once, nothing else changes.
        WrongTag,
        /// `rd_resp_last` is dropped on the 20th request's last beat: `dma_err` must pulse once.
        MissingLast,
    }

    #[derive(Clone, Debug)]
    struct Params {
        seed: u64,
        rings: Vec<Ring>,
        /// cycles of random posting; then everything posted is rung and drained
        cycles: u64,
        lat: (u64, u64),
        p_req_ready: f64,
        p_resp: f64,
        p_wqe_ready: f64,
        p_post: f64,
        /// WQEs a posting cycle tries to post
        posts: usize,
        /// relative posting weight of each ring
        weights: Vec<u32>,
        p_db_now: f64,
        p_junk: f64,
        p_resetup: f64,
        fault: Fault,
    }

    #[derive(Debug, Default)]
    struct Stats {
        slots: u64,
        requests: u64,
        db_accepted: u64,
        db_ignored: u64,
        ring_end_cut: u64,
        full_bursts: u64,
        idx16_wraps: u64,
        resetups: u64,
        max_rr_gap: u32,
        dma_err: u64,
        max_outstanding: u64,
    }

    /// The test's view of one QP.
    struct Qm {
        ring: Ring,
        /// the DUT has the ring (its set-up was accepted) and it is enabled
        live: bool,
        setup_pending: bool,
        /// to be set up again once drained: no more posting
        quiesce: bool,
        pi_drv: u16,
        pi_dut: u16,
        req_next: u16,
        next_out: u16,
        posted: VecDeque<(u16, Slot)>,
        /// requests of other QPs since this one last got work or a request
        waiting: Option<u32>,
        region: u64,
    }

    impl Qm {
        fn size(&self) -> u32 {
            1 << self.ring.log2
        }
        fn slot_addr(&self, idx: u16) -> u64 {
            self.ring.base + ((u32::from(idx) & (self.size() - 1)) as u64) * 64
        }
    }

    #[derive(Clone, Copy, Debug)]
    enum DbKind {
        /// a driver doorbell: the producer index at the time it was rung
        Legit(u16),
        /// an index more than the ring holds ahead of the fetch index (forward or backward): always ignored
        Bogus(bool, u16),
        /// a QPN without a ring (or out of range), any index
        NoRing(u16),
    }

    fn make_wqe(rng: &mut SmallRng, wr_id: u64, max_slots: usize) -> Vec<Slot> {
        let mut w = SendWqe {
            wr_id,
            opcode: [WR_SEND, WR_RDMA_WRITE, WR_RDMA_READ, WR_SEND_WITH_IMM][rng.gen_range(0..4)],
            flags: if rng.gen() { WQE_SIGNALED } else { 0 },
            imm_or_inv: rng.gen(),
            local_addr: rng.gen(),
            length: rng.gen_range(0..65536),
            lkey: rng.gen(),
            remote_addr: rng.gen(),
            rkey: rng.gen(),
            compare_add: rng.gen(),
            swap: rng.gen(),
        };
        let mut extra: Vec<Slot> = Vec::new();
        match rng.gen_range(0..4) {
            0 if max_slots >= 2 => {
                w.opcode = WR_MASKED_ATOMIC_CMP_AND_SWP;
                w.flags |= WQE_EXT;
                extra.push(mask_slot(rng.gen(), rng.gen()));
            }
            1 if max_slots >= 2 => {
                w.opcode = WR_SEND;
                w.flags |= WQE_INLINE;
                w.length = rng.gen_range(1..=(64 * (max_slots as u32 - 1)));
                let mut data = vec![0u8; w.length as usize];
                rng.fill(&mut data[..]);
                for c in data.chunks(64) {
                    let mut s = [0u8; 64];
                    s[..c.len()].copy_from_slice(c);
                    extra.push(s);
                }
            }
            _ => {}
        }
        // a mask slot goes before its WQE, inline data after
        let mut v = Vec::new();
        if w.flags & WQE_EXT != 0 {
            v.append(&mut extra);
        }
        v.push(w.encode());
        v.extend(extra);
        assert_eq!(v.len(), w.slots(), "the WQE's slot count is rnic_driver::host's");
        v
    }

    fn tick(u: &mut Dut) {
        u.clock.next = true.into();
        assert!(simulate(u, 100));
        u.clock.next = false.into();
        assert!(simulate(u, 100));
    }

    /// Drives the block with a host-memory model and checks every slot, request and doorbell verdict.
    fn run(p: &Params) -> Stats {
        let mut u = Dut::default();
        u.connect_all();
        let mut rng = SmallRng::seed_from_u64(p.seed);
        let mut st = Stats::default();
        let mut mem: HashMap<u64, Slot> = HashMap::new();
        let mut qs: Vec<Qm> = p
            .rings
            .iter()
            .map(|r| Qm {
                ring: *r,
                live: false,
                setup_pending: true,
                quiesce: false,
                pi_drv: 0,
                pi_dut: 0,
                req_next: 0,
                next_out: 0,
                posted: VecDeque::new(),
                waiting: None,
                region: r.base & !((1u64 << 22) - 1),
            })
            .collect();
        let nrings = qs.len() as u32;
        let q_of = |qs: &Vec<Qm>, qpn: u32| qs.iter().position(|q| q.ring.qpn == qpn);
        // set-ups: every ring, plus one for an out-of-range QPN aliasing the first ring's RAM row (ignored)
        let mut setups: VecDeque<Ring> = p.rings.iter().copied().collect();
        setups.push_back(Ring { qpn: p.rings[0].qpn + 32, base: 0x1000, log2: 4 });
        let no_ring: Vec<u32> = (0..NQ as u32).filter(|q| q_of(&qs, *q).is_none()).collect();
        let mut dbq: VecDeque<(u32, DbKind)> = VecDeque::new();
        let mut db_cur: Option<(u32, u16, DbKind)> = None;
        let mut resp: VecDeque<(u64, Slot, u8, bool)> = VecDeque::new();
        let mut resp_shown: Option<(u64, Slot, u8, bool)> = None;
        let mut last_ready = 0u64;
        let (mut ign_seen, mut ign_expect) = (0u64, 0u64);
        let (mut req_beats, mut out_beats) = (0u64, 0u64);
        let mut wr_id = 1u64;
        let mut quiet = 0u64;
        let mut progress = 0u64;
        let mut cycle = 0u64;
        loop {
            let posting = cycle < p.cycles;
            // ------------------------------------------------ inputs
            let su = setups.front().copied();
            u.setup_valid.next = su.is_some();
            if let Some(s) = su {
                u.setup_qpn.next = bits(s.qpn as u64);
                u.setup_base.next = bits(s.base);
                u.setup_log2.next = bits(s.log2 as u64);
            }
            if db_cur.is_none() && rng.gen_bool(0.7) {
                if let Some((qpn, kind)) = dbq.pop_front() {
                    // the index is fixed when the doorbell is first presented
                    let pi = match kind {
                        DbKind::Legit(pi) | DbKind::NoRing(pi) => pi,
                        DbKind::Bogus(fwd, r) => {
                            let q = &qs[q_of(&qs, qpn).unwrap()];
                            if fwd {
                                q.pi_dut.wrapping_add(q.size() as u16).wrapping_add(1 + r)
                            } else {
                                q.req_next.wrapping_sub(1 + r)
                            }
                        }
                    };
                    db_cur = Some((qpn, pi, kind));
                }
            }
            u.db_valid.next = db_cur.is_some();
            if let Some((qpn, pi, _)) = db_cur {
                u.db_qpn.next = bits(qpn as u64);
                u.db_pi.next = bits(pi as u64);
            }
            u.dma.req_ready.next = rng.gen_bool(p.p_req_ready);
            if resp_shown.is_none() && resp.front().map_or(false, |b| b.0 <= cycle) && rng.gen_bool(p.p_resp) {
                resp_shown = resp.pop_front();
            }
            u.dma.resp_valid.next = resp_shown.is_some();
            if let Some((_, d, tag, last)) = resp_shown {
                u.dma.resp_data.next = to_bits(&d);
                u.dma.resp_tag.next = bits(tag as u64);
                u.dma.resp_last.next = last;
            }
            u.wqe_ready.next = rng.gen_bool(p.p_wqe_ready);
            u.clock.next = false.into();
            assert!(simulate(&mut u, 100));

            // ------------------------------------------------ outputs of this cycle
            if u.db_ignored.val() {
                ign_seen += 1;
            }
            if u.dma_err.val() {
                st.dma_err += 1;
                assert!(p.fault != Fault::None, "cycle {cycle}: dma_err without a fault");
            }
            // doorbell (before a set-up accepted in the same cycle: the engine takes the doorbell first)
            if u.db_valid.val() && u.db_ready.val() {
                let (qpn, pi, kind) = db_cur.take().unwrap();
                progress = cycle;
                assert_eq!(ign_seen, ign_expect, "cycle {cycle}: the previous doorbell's verdict is out");
                let qi = q_of(&qs, qpn).filter(|_| (qpn as usize) < NQ);
                let ign = match qi {
                    Some(i) if qs[i].live => {
                        let d = u32::from(pi.wrapping_sub(qs[i].req_next));
                        d == 0 || d > qs[i].size()
                    }
                    _ => true,
                };
                if matches!(kind, DbKind::Bogus(..) | DbKind::NoRing(_)) {
                    assert!(ign, "test generator: a bogus doorbell must be one the block ignores");
                }
                if ign {
                    ign_expect += 1;
                    st.db_ignored += 1;
                } else {
                    let q = &mut qs[qi.unwrap()];
                    st.db_accepted += 1;
                    if q.req_next == q.pi_dut {
                        q.waiting = Some(0);
                    }
                    q.pi_dut = pi;
                }
            }
            if u.setup_valid.val() && u.setup_ready.val() {
                let s = setups.pop_front().unwrap();
                if let Some(i) = q_of(&qs, s.qpn) {
                    let q = &mut qs[i];
                    assert!(q.setup_pending && q.posted.is_empty() && q.next_out == q.pi_drv);
                    q.ring = s;
                    q.live = s.log2 != 0;
                    q.setup_pending = false;
                    q.pi_drv = 0;
                    q.pi_dut = 0;
                    q.req_next = 0;
                    q.next_out = 0;
                    q.waiting = None;
                }
            }
            // DMA read request
            if u.dma.req_valid.val() && u.dma.req_ready.val() {
                let addr = u.dma.req_addr.val().to_u64();
                let len = u.dma.req_len.val().to_u64();
                let tag = u.dma.req_tag.val().to_u64() as u8;
                assert!(addr % 64 == 0 && len % 64 == 0 && len >= 64, "cycle {cycle}: request {addr:#x} {len}");
                let n = (len / 64) as u32;
                assert!(n as usize <= MAX_BURST, "cycle {cycle}: {n} slots > MAX_BURST");
                let i = qs
                    .iter()
                    .position(|q| {
                        q.live
                            && u128::from(addr) >= u128::from(q.ring.base)
                            && u128::from(addr) < u128::from(q.ring.base) + u128::from(q.size()) * 64
                    })
                    .unwrap_or_else(|| panic!("cycle {cycle}: request {addr:#x} is in no ring"));
                let q = &mut qs[i];
                let slot = ((addr - q.ring.base) / 64) as u32;
                assert!(slot + n <= q.size(), "cycle {cycle}: request crosses the ring end");
                assert_eq!(addr, q.slot_addr(q.req_next), "cycle {cycle}: QP {} fetches out of order", q.ring.qpn);
                let avail = u32::from(q.pi_dut.wrapping_sub(q.req_next));
                assert!(n <= avail, "cycle {cycle}: QP {} fetches past pi", q.ring.qpn);
                let group = MAX_BURST as u32 - slot % MAX_BURST as u32;
                let want = avail.min(q.size() - slot).min(group);
                assert_eq!(n, want, "cycle {cycle}: burst of {n}, not min(avail, to ring end, to the 8-slot group end)");
                if want < avail.min(MAX_BURST as u32) {
                    st.ring_end_cut += 1;
                }
                if n as usize == MAX_BURST {
                    st.full_bursts += 1;
                }
                req_beats += u64::from(n);
                let outstanding = req_beats - out_beats;
                st.max_outstanding = st.max_outstanding.max(outstanding);
                assert!(outstanding <= OUT_DEPTH as u64, "cycle {cycle}: {outstanding} beats asked, no room");
                let mut ready = (cycle + rng.gen_range(p.lat.0..=p.lat.1)).max(last_ready);
                for k in 0..n {
                    let mut a = addr + 64 * u64::from(k);
                    let mut t = tag;
                    let mut last = k == n - 1;
                    if st.requests == 19 && k == 0 {
                        match p.fault {
                            Fault::WrongData => a += 64,
                            Fault::WrongTag => t ^= 0x5A,
                            _ => {}
                        }
                    }
                    if st.requests == 19 && last && p.fault == Fault::MissingLast {
                        last = false;
                    }
                    resp.push_back((ready, *mem.get(&a).unwrap_or(&[0xEE; 64]), t, last));
                    ready += 1;
                }
                last_ready = ready - 1;
                q.req_next = q.req_next.wrapping_add(n as u16);
                st.requests += 1;
                progress = cycle;
                // round robin: every other QP with work waits at most one request of each of the others
                let qpn = q.ring.qpn;
                for q in qs.iter_mut() {
                    if q.ring.qpn == qpn {
                        q.waiting = (q.req_next != q.pi_dut).then_some(0);
                    } else if let Some(w) = q.waiting.as_mut() {
                        *w += 1;
                        st.max_rr_gap = st.max_rr_gap.max(*w);
                        assert!(*w < nrings, "cycle {cycle}: QP {} starved ({} requests of others)", q.ring.qpn, *w);
                    }
                }
            }
            if resp_shown.is_some() {
                // the credits leave room for every beat asked for: a response is always taken at once
                assert!(u.dma.resp_ready.val(), "cycle {cycle}: the response channel is back-pressured");
                resp_shown = None;
            }
            // WQE slot out
            if u.wqe_valid.val() && u.wqe_ready.val() {
                let qpn = u.wqe_qpn.val().to_u64() as u32;
                let idx = u.wqe_idx.val().to_u64() as u16;
                let i = q_of(&qs, qpn).unwrap_or_else(|| panic!("cycle {cycle}: a slot of QP {qpn}, which has no ring"));
                let q = &mut qs[i];
                assert_eq!(idx, q.next_out, "cycle {cycle}: QP {qpn} slot out of order");
                let (pidx, bytes) = q.posted.pop_front().unwrap_or_else(|| panic!("cycle {cycle}: QP {qpn}: nothing posted"));
                assert_eq!(pidx, idx);
                let fetched = u32::from(q.req_next.wrapping_sub(idx));
                assert!(fetched >= 1 && fetched <= q.size(), "cycle {cycle}: QP {qpn} slot {idx} was never requested");
                assert!(from_bits(u.wqe_data.val()) == bytes, "cycle {cycle}: QP {qpn} slot {idx}: wrong bytes");
                q.next_out = q.next_out.wrapping_add(1);
                if q.next_out == 0 {
                    st.idx16_wraps += 1;
                }
                out_beats += 1;
                st.slots += 1;
                progress = cycle;
            }
            tick(&mut u);

            // ------------------------------------------------ the driver
            if posting {
                for _ in 0..p.posts {
                    if !rng.gen_bool(p.p_post) {
                        continue;
                    }
                    let total: u32 = p.weights.iter().sum();
                    let mut pick = rng.gen_range(0..total);
                    let mut i = 0;
                    while pick >= p.weights[i] {
                        pick -= p.weights[i];
                        i += 1;
                    }
                    let q = &mut qs[i];
                    if q.live && !q.setup_pending && !q.quiesce {
                        let max_slots = (q.size() as usize).min(4);
                        let w = make_wqe(&mut rng, wr_id, max_slots);
                        let used = u32::from(q.pi_drv.wrapping_sub(q.next_out));
                        if used + w.len() as u32 <= q.size() {
                            wr_id += 1;
                            for s in w {
                                mem.insert(q.slot_addr(q.pi_drv), s);
                                q.posted.push_back((q.pi_drv, s));
                                q.pi_drv = q.pi_drv.wrapping_add(1);
                            }
                            if rng.gen_bool(p.p_db_now) {
                                dbq.push_back((q.ring.qpn, DbKind::Legit(q.pi_drv)));
                            }
                        }
                    }
                }
                if rng.gen_bool(p.p_junk) {
                    let i = rng.gen_range(0..qs.len());
                    let q = &qs[i];
                    match rng.gen_range(0..5) {
                        // ring again with what was already rung (often no advance)
                        0 | 1 if q.live && !q.setup_pending => dbq.push_back((q.ring.qpn, DbKind::Legit(q.pi_drv))),
                        2 if q.live && !q.setup_pending && q.ring.log2 <= 14 => {
                            dbq.push_back((q.ring.qpn, DbKind::Bogus(rng.gen(), rng.gen_range(0..200))))
                        }
                        3 => dbq.push_back((no_ring[rng.gen_range(0..no_ring.len())], DbKind::NoRing(rng.gen()))),
                        4 => {
                            let qpn = if rng.gen() { rng.gen_range(NQ as u32..40) } else { 0xFF_FFFF };
                            dbq.push_back((qpn, DbKind::NoRing(rng.gen())))
                        }
                        _ => {}
                    }
                }
                if rng.gen_bool(0.02) {
                    // catch up: ring every QP that has posted more than it rang
                    for q in qs.iter() {
                        if q.live && !q.setup_pending && q.pi_drv != q.pi_dut && rng.gen() {
                            dbq.push_back((q.ring.qpn, DbKind::Legit(q.pi_drv)));
                        }
                    }
                }
                if rng.gen_bool(p.p_resetup) {
                    // stop posting on a QP; once drained its ring is set up again (new base and size, or disabled)
                    let i = rng.gen_range(0..qs.len());
                    if !qs[i].setup_pending {
                        qs[i].quiesce = true;
                    }
                }
                for q in qs.iter_mut() {
                    let busy = dbq.iter().any(|d| d.0 == q.ring.qpn) || db_cur.map_or(false, |d| d.0 == q.ring.qpn);
                    if q.quiesce && !busy && q.posted.is_empty() && q.pi_dut == q.pi_drv {
                        let log2 = if rng.gen_ratio(1, 6) { 0 } else { rng.gen_range(1..=8u8) };
                        // across bit 22, except at the top of the address space: end at 2^64 there
                        let size = 1u64 << log2.max(1);
                        let k = if q.region.wrapping_add(1 << 22) == 0 { size } else { rng.gen_range(1..=size) };
                        let off = (1u64 << 22) - 64 * k;
                        setups.push_back(Ring { qpn: q.ring.qpn, base: q.region + off, log2 });
                        q.setup_pending = true;
                        q.quiesce = false;
                        st.resetups += 1;
                    } else if q.quiesce && !busy && q.pi_dut != q.pi_drv {
                        dbq.push_back((q.ring.qpn, DbKind::Legit(q.pi_drv)));
                    }
                }
            } else {
                // drain: ring whatever was posted and not rung
                for q in qs.iter_mut() {
                    let queued = dbq.iter().any(|d| d.0 == q.ring.qpn) || db_cur.map_or(false, |d| d.0 == q.ring.qpn);
                    if q.live && !q.setup_pending && q.pi_drv != q.pi_dut && !queued {
                        dbq.push_back((q.ring.qpn, DbKind::Legit(q.pi_drv)));
                    }
                }
            }
            // done: everything posted came out, nothing in flight, then a quiet while with nothing moving
            let drained = !posting
                && setups.is_empty()
                && dbq.is_empty()
                && db_cur.is_none()
                && resp.is_empty()
                && qs.iter().all(|q| q.posted.is_empty() && q.pi_dut == q.pi_drv);
            if drained {
                assert!(!u.dma.req_valid.val() || quiet == 0, "cycle {cycle}: a request after everything was fetched");
                quiet += 1;
                if quiet > 200 {
                    break;
                }
            } else {
                if cycle > progress + 5_000 {
                    for q in &qs {
                        eprintln!(
                            "QP {} live {} pend {} pi_drv {} pi_dut {} req_next {} next_out {} posted {}",
                            q.ring.qpn, q.live, q.setup_pending, q.pi_drv, q.pi_dut, q.req_next, q.next_out, q.posted.len()
                        );
                    }
                    eprintln!(
                        "state {:?} used {} credit_ok {} sch_ne {} su_pend {} dbq {} db_cur {:?} setups {} resp {}",
                        u.state.q.val(), u.used.q.val().to_u64(), u.credit_ok.q.val(), u.sch_ne.q.val(), u.su_pend.q.val(),
                        dbq.len(), db_cur, setups.len(), resp.len()
                    );
                    panic!("cycle {cycle}: no progress since cycle {progress}: {st:?}");
                }
            }
            cycle += 1;
        }
        assert_eq!(ign_seen, ign_expect, "every ignored doorbell is counted once");
        assert!(!u.wqe_valid.val(), "a slot nobody posted");
        eprintln!("{st:?} in {cycle} cycles");
        st
    }

    /// Bases chosen so that ring addresses carry across the 8-bit slices and bit 22, one ring ends at 2^64.
    fn rings() -> Vec<Ring> {
        vec![
            Ring { qpn: 0, base: 0x0000_0000_0040_0000 - 64 * 3, log2: 1 },
            Ring { qpn: 3, base: 0x0000_7FFF_FFC0_0000 + (1 << 22) - 64 * 5, log2: 3 },
            Ring { qpn: 5, base: 0x1234_5678_9A80_0000 + (1 << 22) - 64 * 37, log2: 6 },
            Ring { qpn: 9, base: 0x0000_0001_0000_0000 - 64 * 700, log2: 10 },
            Ring { qpn: 17, base: 0xFFFF_FFFF_FFFF_FFFF - 64 * 32768 + 1, log2: 15 },
            Ring { qpn: 23, base: 0x0000_00FF_FFC0_0000 + (1 << 22) - 64 * 2, log2: 2 },
        ]
    }

    fn params(seed: u64) -> Params {
        Params {
            seed,
            rings: rings(),
            cycles: 12_000,
            lat: (2, 40),
            p_req_ready: 0.7,
            p_resp: 0.8,
            p_wqe_ready: 0.35,
            p_post: 0.5,
            posts: 1,
            weights: vec![1; 6],
            p_db_now: 0.15,
            p_junk: 0.05,
            p_resetup: 0.003,
            fault: Fault::None,
        }
    }

    #[test]
    fn sq_ring_serves_every_posted_slot_once_in_order_round_robin() {
        let st = run(&params(1));
        assert!(st.slots > 3000 && st.requests > 500, "{st:?}");
        assert!(st.db_ignored > 100 && st.db_accepted > 500, "{st:?}");
        assert!(st.ring_end_cut > 20 && st.full_bursts > 20 && st.resetups > 5, "{st:?}");
        assert!(st.max_rr_gap >= 3, "contention between QPs was exercised: {st:?}");
        assert!(st.max_outstanding > 24, "the credit limit was reached: {st:?}");
    }

    #[test]
    fn sq_ring_flat_out_and_slow_consumer() {
        // flat out: DMA always ready, short latency, consumer always ready
        let mut p = params(2);
        p.lat = (1, 4);
        p.p_req_ready = 1.0;
        p.p_resp = 1.0;
        p.p_wqe_ready = 1.0;
        p.p_post = 0.5;
        p.posts = 2;
        p.p_db_now = 0.05;
        p.p_junk = 0.01;
        let st = run(&p);
        assert!(st.slots > 5000, "{st:?}");
        // a slow consumer and long DMA latency: credits bind
        let mut p = params(3);
        p.lat = (30, 120);
        p.p_wqe_ready = 0.15;
        p.p_req_ready = 0.3;
        let st = run(&p);
        assert!(st.max_outstanding > 24 && st.max_rr_gap >= 3, "{st:?}");
    }

    /// The 16-bit ring index wraps (twice for the small ring) and the ring wraps thousands of times.
    #[test]
    fn sq_ring_index_wraps_past_2_16() {
        let p = Params {
            seed: 4,
            rings: vec![
                Ring { qpn: 7, base: 0x0000_0002_003F_FF00, log2: 3 },
                Ring { qpn: 12, base: 0x0000_7654_3210_0000 - 64 * 9, log2: 7 },
            ],
            cycles: 90_000,
            lat: (1, 6),
            p_req_ready: 1.0,
            p_resp: 1.0,
            p_wqe_ready: 1.0,
            p_post: 1.0,
            posts: 3,
            weights: vec![1, 9],
            p_db_now: 0.02,
            p_junk: 0.002,
            p_resetup: 0.0,
            fault: Fault::None,
        };
        let st = run(&p);
        assert!(st.idx16_wraps >= 1, "{st:?}");
    }

    /// The checker bites: a DMA that returns the wrong slot's bytes makes the run fail.
    #[test]
    fn sq_ring_checker_catches_wrong_bytes() {
        let mut p = params(5);
        p.cycles = 2_000;
        p.fault = Fault::WrongData;
        let r = std::panic::catch_unwind(|| run(&p));
        let e = r.expect_err("a wrong slot must be caught");
        let msg = e.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("wrong bytes"), "{msg}");
    }

    /// A beat with a wrong tag or a misplaced `last` gives exactly one `dma_err` pulse; slots are still placed by
    /// the beat count and come out right.
    #[test]
    fn sq_ring_flags_a_wrong_tag_or_last() {
        for fault in [Fault::WrongTag, Fault::MissingLast] {
            let mut p = params(6);
            p.cycles = 2_000;
            p.fault = fault;
            let st = run(&p);
            assert_eq!(st.dma_err, 1, "{fault:?}: {st:?}");
        }
    }

    /// One cycle of a command-driven rig: command `c` (0 set-up with base `v`, 1 doorbell with pi `v`, 2 rewind
    /// to index `v`, for QP `q`, rings of 16 slots) offered, the DMA read port always ready, the head of `resp`
    /// offered as a response beat, every slot taken; settles and says whether the command was taken.
    fn drive_cycle(u: &mut Dut, c: Option<(u8, u32, u64)>, resp: &VecDeque<(Slot, u8, bool)>) -> bool {
        u.setup_valid.next = matches!(c, Some((0, ..)));
        u.db_valid.next = matches!(c, Some((1, ..)));
        u.rw_valid.next = matches!(c, Some((2, ..)));
        if let Some((_, q, v)) = c {
            u.setup_qpn.next = bits(q as u64);
            u.setup_base.next = bits(v);
            u.setup_log2.next = bits(4);
            u.db_qpn.next = bits(q as u64);
            u.db_pi.next = bits(v & 0xFFFF);
            u.rw_qpn.next = bits(q as u64);
            u.rw_idx.next = bits(v & 0xFFFF);
        }
        u.dma.req_ready.next = true;
        u.dma.resp_valid.next = !resp.is_empty();
        if let Some((d, tag, last)) = resp.front() {
            u.dma.resp_data.next = to_bits(d);
            u.dma.resp_tag.next = bits(*tag as u64);
            u.dma.resp_last.next = *last;
        }
        u.wqe_ready.next = true;
        u.clock.next = false.into();
        assert!(simulate(u, 100));
        match c {
            Some((0, ..)) => u.setup_ready.val(),
            Some((1, ..)) => u.db_ready.val(),
            Some((2, ..)) => u.rw_ready.val(),
            _ => false,
        }
    }

    /// Go-back-N: a rewind sets the QP's fetch index back, and the slots from there on are read again and
    /// delivered again, in order, after everything read before the rewind; other QPs are untouched.
    #[test]
    fn a_rewind_reads_the_slots_again_from_the_given_index() {
        let mut u = Dut::default();
        u.connect_all();
        let mut mem: HashMap<u64, Slot> = HashMap::new();
        let (base_a, base_b) = (0x10_000u64, 0x20_000u64);
        for i in 0..16u64 {
            for (b, q) in [(base_a, 3u8), (base_b, 5u8)] {
                let mut sl = [0u8; 64];
                sl[0] = q;
                sl[1] = i as u8;
                mem.insert(b + 64 * i, sl);
            }
        }
        // inputs: a queue of (kind, qpn, value) commands: 0 set-up (value = base), 1 doorbell (pi), 2 rewind (idx)
        let mut cmds: VecDeque<(u8, u32, u64)> =
            vec![(0, 3, base_a), (0, 5, base_b), (1, 3, 6), (1, 5, 4)].into_iter().collect();
        let mut resp: VecDeque<(Slot, u8, bool)> = VecDeque::new();
        let mut out: Vec<(u32, u16, u8, u8)> = Vec::new();
        let mut rewound = false;
        let mut gens: Vec<(u32, u64)> = Vec::new();
        for _cycle in 0..3000 {
            let c = cmds.front().copied();
            if drive_cycle(&mut u, c, &resp) {
                cmds.pop_front();
            }
            if u.dma.req_valid.val() {
                let (addr, n, tag) = (u.dma.req_addr.val().to_u64(), u.dma.req_len.val().to_u64() / 64, u.dma.req_tag.val().to_u64() as u8);
                for k in 0..n {
                    resp.push_back((mem[&(addr + 64 * k)], tag, k + 1 == n));
                }
            }
            if u.dma.resp_valid.val() && u.dma.resp_ready.val() {
                resp.pop_front();
            }
            if u.wqe_valid.val() {
                let d = from_bits(u.wqe_data.val());
                out.push((u.wqe_qpn.val().to_u64() as u32, u.wqe_idx.val().to_u64() as u16, d[0], d[1]));
                gens.push((u.wqe_qpn.val().to_u64() as u32, u.wqe_gen.val().to_u64()));
            }
            tick(&mut u);
            // once QP 3 has delivered its six slots, go back to index 2
            if !rewound && out.iter().filter(|o| o.0 == 3).count() == 6 {
                rewound = true;
                cmds.push_back((2, 3, 2));
            }
        }
        assert!(rewound);
        let a: Vec<(u16, u8)> = out.iter().filter(|o| o.0 == 3).map(|o| (o.1, o.3)).collect();
        let want: Vec<(u16, u8)> = [0u16, 1, 2, 3, 4, 5, 2, 3, 4, 5].iter().map(|&i| (i, i as u8)).collect();
        assert_eq!(a, want, "QP 3: slots 0..6, then 2..6 again, each from its own host address");
        let b: Vec<u16> = out.iter().filter(|o| o.0 == 5).map(|o| o.1).collect();
        assert_eq!(b, vec![0, 1, 2, 3], "QP 5 untouched");
        assert!(out.iter().all(|o| o.2 as u32 == o.0), "each slot from its own ring");
        let g: Vec<u64> = gens.iter().filter(|g| g.0 == 3).map(|g| g.1).collect();
        assert_eq!(g, vec![0, 0, 0, 0, 0, 0, 1, 1, 1, 1], "the slots read after the rewind carry the next generation");
        assert!(gens.iter().filter(|g| g.0 == 5).all(|g| g.1 == 0));
    }

    /// Direct service: a doorbell for a QP that is not queued, with no other QP waiting, issues the QP's read
    /// itself, 6 cycles after it is taken (5 + 7 through the scheduled-QP FIFO); the read carries the QP's
    /// current rewind generation (read by the doorbell) and the slots come in order.
    #[test]
    fn a_doorbell_on_an_idle_queue_issues_its_read_itself() {
        let mut u = Dut::default();
        u.connect_all();
        let base = 0x10_000u64;
        // commands: 0 set-up, 1 doorbell (pi), 2 rewind (idx); each starts once the previous one's slots are out
        let mut cmds: VecDeque<(u8, u64, usize)> = vec![(0, base, 0), (1, 2, 0), (2, 0, 2), (1, 5, 4)].into_iter().collect();
        let qp3 = |c: (u8, u64, usize)| (c.0, 3u32, c.1);
        let mut resp: VecDeque<(Slot, u8, bool)> = VecDeque::new();
        let mut out: Vec<(u16, u64)> = Vec::new();
        let (mut db_at, mut lat) = (None, Vec::new());
        for cycle in 0..2000u64 {
            let c = cmds.front().copied().filter(|c| out.len() >= c.2);
            if drive_cycle(&mut u, c.map(qp3), &resp) {
                if matches!(c, Some((1, ..))) {
                    db_at = Some(cycle);
                }
                cmds.pop_front();
            }
            if u.dma.req_valid.val() {
                if let Some(t) = db_at.take() {
                    lat.push(cycle - t);
                }
                let (addr, n, tag) = (u.dma.req_addr.val().to_u64(), u.dma.req_len.val().to_u64() / 64, u.dma.req_tag.val().to_u64() as u8);
                for k in 0..n {
                    let mut sl = [0u8; 64];
                    sl[1] = ((addr - base) / 64 + k) as u8;
                    resp.push_back((sl, tag, k + 1 == n));
                }
            }
            if u.dma.resp_valid.val() && u.dma.resp_ready.val() {
                resp.pop_front();
            }
            if u.wqe_valid.val() {
                let d = from_bits(u.wqe_data.val());
                assert_eq!(d[1] as u64, u.wqe_idx.val().to_u64(), "the slot at its index");
                out.push((u.wqe_idx.val().to_u64() as u16, u.wqe_gen.val().to_u64()));
            }
            tick(&mut u);
        }
        assert_eq!(out, vec![(0, 0), (1, 0), (0, 1), (1, 1), (2, 1), (3, 1), (4, 1)], "slots in order, generation after the rewind");
        assert_eq!(lat, vec![6, 6], "doorbell taken to read: both doorbells serviced directly");
    }
}
