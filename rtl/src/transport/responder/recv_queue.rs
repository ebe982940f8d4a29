//! Receive Queue and WQE Prefetch: the Responder's per-QP receive rings (CMD_WRITE_RQ's base, size and CQ; the
//! producer index the RQ doorbell writes; the consumer index the Responder moves on) and the receive-WQE
//! reads, all through `pf_ram`: [`PF_DEPTH`] entries per QP (by the ring index's low three bits), each the
//! descriptor of one 64-byte `RecvWqe` slot, tagged with its ring index, or marked pending while its read is on
//! its way (so no slot is read twice).
//!
//! * **Prefetch at a take.** When the Responder takes the WQE at index i (`fetch` with a hit), the read of
//!   i + PF_DEPTH is queued if the ring holds it (`pf_far`: `pi - ci` beyond PF_DEPTH by a [`RingDist`]) and no
//!   other read waits, so a QP's WQEs are read PF_DEPTH messages before they are needed.
//! * **A miss** (`fetch` finds neither the WQE nor its read on its way): its read is queued like a prefetch,
//!   from the slot address the Responder summed (`wqe_addr`), issued without the adder's four cycles.
//! * **The doorbell engine** (`dbs`, run while the Responder waits in `Db`, between packets): an RQ doorbell's
//!   new indices that lie in the QP's window (PF_DEPTH from the index it takes next) and are neither there nor
//!   on their way are read, one per three cycles (`Pf`..`Pf3` find the window, then `Rd`/`Chk`/`Go`, waiting for
//!   the request slot rather than skipping an index). CMD_WRITE_RQ drops the QP's eight entries (`Clr`), taken
//!   only with no read on its way (`idle`), so none lands in the new ring.
//! * **Reads** wait in `pq_*` while `add_g` sums the slot's address (4 cycles), go out on the DMA read port in
//!   order (`pfo` the tags of those on their way) and land in their entry, unless this block writes `pf_ram`
//!   in that cycle itself (the landing waits a cycle). The Responder's atomic read shares the port: it is
//!   issued only when `idle`, so the port's in-order responses are these reads' while `pfo` holds any.
//!
//! **Timing.** Every input is a register of the Responder or a decode of its state register; the
//! 16-bit ring-index subtracts are Ring Distance blocks (`gap`, `db_off`; a full subtract is 7 LUT levels).

use rust_hdl::prelude::*;

use crate::common::consts::k;
use crate::common::fifo::{Fifo, SdpRam};
use crate::common::ring_dist::RingDist;
use crate::transport::key_cache::PipeAdd64;

/// Receive WQEs each QP may hold prefetched in `pf_ram` (its entries are indexed by the ring index's low
/// three bits). At a SEND every 29 cycles on one QP (1 KiB at 100G), eight WQEs ahead cover a host round trip
/// of 160 cycles and more.
pub const PF_DEPTH: usize = 8;

/// A prefetched receive WQE (see `pf_ram`): the descriptor of slot `ci` of its QP's ring.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct PfEnt {
    pub valid: Bit,
    /// the read of slot `ci` is on its way (not valid yet)
    pub pending: Bit,
    /// the ring index (consumer index, not masked) the WQE was read for
    pub ci: Bits<16>,
    pub wr_id: Bits<64>,
    pub addr: Bits<64>,
    pub len: Bits<32>,
    pub lkey: Bits<32>,
}

/// A receive-WQE read on its way: which QP and ring index its response belongs to.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct PfTag {
    /// its entry of `pf_ram`: QPN[7:0] and the ring index's low three bits
    pub ent: Bits<11>,
    pub ci: Bits<16>,
}

/// Receive ring of a QP.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct RqCfg {
    pub base: Bits<64>,
    pub mask: Bits<16>,
    pub cqn: Bits<24>,
}

/// The doorbell engine's states (they run while the Responder is in `Db`).
#[derive(Copy, Clone, Debug, PartialEq, LogicState)]
enum DbState {
    Pf,
    Pf2,
    Pf3,
    Rd,
    Chk,
    Go,
    Clr,
    Done,
}

crate::logic_block! {
    /// The Receive Queue and WQE Prefetch (see the module documentation).
    pub struct RecvQueue {
        pub clock: Signal<In, Clock>,
        /// The packet's QP: its ring state and its entry for the consumer index are read at it.
        pub qpn: Signal<In, Bits<24>>,
        /// CMD_WRITE_RQ: ring base (64-byte aligned), log2 entries (<= 15), receive CQ; `rqs_go`: taken.
        pub rqs_go: Signal<In, Bit>,
        pub rqs_qpn: Signal<In, Bits<24>>,
        pub rqs_base: Signal<In, Bits<64>>,
        pub rqs_log2: Signal<In, Bits<4>>,
        pub rqs_cqn: Signal<In, Bits<24>>,
        /// RQ doorbell: new producer index; `rqdb_go`: taken.
        pub rqdb_go: Signal<In, Bit>,
        pub rqdb_qpn: Signal<In, Bits<24>>,
        pub rqdb_pi: Signal<In, Bits<16>>,
        /// A request header is taken: its QP's ring state is read (`take_qpn`).
        pub take: Signal<In, Bit>,
        pub take_qpn: Signal<In, Bits<24>>,
        /// The QP lookup answers: the ring state read at the take goes into `cfg`, `pi`, `ci`.
        pub load: Signal<In, Bit>,
        /// The checks start: `ci + 1` and `ci + PF_DEPTH` are summed.
        pub pre: Signal<In, Bit>,
        /// The Responder needs the WQE at `ci` (its Fetch state): taken on a hit, its read queued on a miss;
        /// `fetch_pf`: a hit may queue the prefetch of `ci + PF_DEPTH` (not while flushing).
        pub fetch: Signal<In, Bit>,
        pub fetch_pf: Signal<In, Bit>,
        /// The slot address of the WQE at `ci` (a miss reads it from there).
        pub wqe_addr: Signal<In, Bits<64>>,
        /// A flush moves to the next index: `ci1` from the Responder's sum.
        pub ci1_we: Signal<In, Bit>,
        pub ci1_in: Signal<In, Bits<16>>,
        /// A receive completion is raised: the consumer index moves on (`ci1`).
        pub raise: Signal<In, Bit>,
        /// The packet's write-back: the consumer index is stored.
        pub wb: Signal<In, Bit>,
        /// The Responder waits in `Db`: the doorbell engine runs; `db_done` once it has finished.
        pub db_run: Signal<In, Bit>,
        pub db_done: Signal<Out, Bit>,
        /// The doorbell QP holds the WQE at its consumer index (its responder state, read at the doorbell).
        pub have_wqe: Signal<In, Bit>,
        /// The packet QP's ring: configuration, producer and consumer index, the consumer index's slot.
        pub cfg: Signal<Out, RqCfg>,
        pub pi: Signal<Out, Bits<16>>,
        pub ci: Signal<Out, Bits<16>>,
        pub slot: Signal<Out, Bits<16>>,
        /// The WQE at `ci` is in its entry (`ent`).
        pub hit: Signal<Out, Bit>,
        pub ent: Signal<Out, PfEnt>,
        /// No read queued or on its way (CMD_WRITE_RQ and the atomic's read wait for it).
        pub idle: Signal<Out, Bit>,
        /// The DMA read port (one 64-byte slot per request; `rd_req_addr` is `wqe_addr` when no read is issued).
        pub rd_req_valid: Signal<Out, Bit>,
        pub rd_req_ready: Signal<In, Bit>,
        pub rd_req_addr: Signal<Out, Bits<64>>,
        pub rd_resp_valid: Signal<In, Bit>,
        pub rd_resp_ready: Signal<Out, Bit>,
        pub rd_resp_data: Signal<In, Bits<512>>,

        cfg_ram: SdpRam<RqCfg, 8>,
        pi_ram: SdpRam<Bits<16>, 8>,
        ci_ram: SdpRam<Bits<16>, 8>,
        r_cfg: DFF<RqCfg>,
        r_pi: DFF<Bits<16>>,
        r_ci: DFF<Bits<16>>,
        /// the index after the consumer index (the next one a completion moves to), and the one PF_DEPTH on (the
        /// prefetch a take queues)
        ci1: DFF<Bits<16>>,
        ci2: DFF<Bits<16>>,
        pf_ram: SdpRam<PfEnt, 11>,
        pfo: Fifo<PfTag, 4, 5>,
        add_g: PipeAdd64,
        ag_a: DFF<Bits<64>>,
        ag_b: DFF<Bits<64>>,
        pq_v: DFF<Bit>,
        pq_ent: DFF<Bits<11>>,
        pq_ci: DFF<Bits<16>>,
        pq_cnt: DFF<Bits<3>>,
        pq_direct: DFF<Bit>,
        /// a doorbell's QP and new producer index, and the ring index it reads next (from the producer index
        /// before the doorbell; Rd/Chk move it on; Clr counts its entries with it)
        db_qpn: DFF<Bits<8>>,
        db_pi: DFF<Bits<16>>,
        db_tgt: DFF<Bits<16>>,
        /// the first ring index of the doorbell QP's prefetch window (Pf..Pf2)
        db_t0: DFF<Bits<16>>,
        /// window slots left from db_tgt on (Pf3, then one less per Chk)
        db_left: DFF<Bits<4>>,
        /// Chk's verdict on db_tgt's entry (`l_db_want`), acted on in Go
        db_w: DFF<Bit>,
        dbs: DFF<DbState>,
        /// whether pi - ci exceeds PF_DEPTH (the ring holds ci + PF_DEPTH): `gap` (registered halves) then
        /// `pf_far`, settled by Fetch (pi and ci are loaded at the take, five cycles before)
        gap: RingDist = RingDist::new(PF_DEPTH as u8 + 1),
        pf_far: DFF<Bit>,
        /// db_tgt's offset in the doorbell QP's window (db_tgt - db_t0; set in Pf, read in Pf3)
        db_off: RingDist = RingDist::new(PF_DEPTH as u8),
        /// Fetch has queued the read of its WQE (the entry's read data shows it two cycles later)
        f_req: DFF<Bit>,
        l_pq_ent: Signal<Local, Bits<11>>,
        l_pf_ent: Signal<Local, Bits<11>>,
        l_db_want: Signal<Local, Bit>,
        l_db_ent0: Signal<Local, Bits<11>>,
        l_db_ent: Signal<Local, Bits<11>>,
        l_db_go: Signal<Local, Bit>,
        l_pq_ci: Signal<Local, Bits<16>>,
        l_pq_base: Signal<Local, Bits<64>>,
        l_pf_pend: Signal<Local, Bit>,
        l_pf_go: Signal<Local, Bit>,
        l_pf_idle: Signal<Local, Bit>,
        l_pf_hit: Signal<Local, Bit>,
        l_pf_slot: Signal<Local, Bits<16>>,
        /// a read is queued in pq_* this cycle: the prefetch of ci2 or of a doorbell's db_tgt, or (`l_pq_miss`)
        /// the read of ci
        l_pq_load: Signal<Local, Bit>,
        l_pq_miss: Signal<Local, Bit>,
        /// this block writes pf_ram this cycle (its address and data set there): a landing read waits a cycle
        l_pf_own: Signal<Local, Bit>,
        l_wqe: Signal<Local, Bits<512>>,
        k_depth16: Constant<Bits<16>> = k(PF_DEPTH as u64),
        k_depth4: Constant<Bits<4>> = k(PF_DEPTH as u64),
        zero3: Constant<Bits<3>> = k(0),
        one3: Constant<Bits<3>> = k(1),
        four3: Constant<Bits<3>> = k(4),
        seven3: Constant<Bits<3>> = k(7),
        zero4: Constant<Bits<4>> = k(0),
        one4: Constant<Bits<4>> = k(1),
        zero16: Constant<Bits<16>> = k(0),
        one16: Constant<Bits<16>> = k(1),
        ones16: Constant<Bits<16>> = k(0xFFFF),
    }
}

impl Logic for RecvQueue {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, r_cfg, r_pi, r_ci, ci1, ci2, ag_a, ag_b, pq_v, pq_ent, pq_ci, pq_cnt, pq_direct, db_qpn, db_pi, db_tgt,
            db_t0, db_left, db_w, dbs, pf_far, f_req
        );
        clock!(self, clock, cfg_ram, pi_ram, ci_ram, pf_ram, pfo, add_g, gap, db_off);
        self.add_g.a.next = self.ag_a.q.val();
        self.add_g.b.next = self.ag_b.q.val();
        self.add_g.cin.next = false;
        self.cfg.next = self.r_cfg.q.val();
        self.pi.next = self.r_pi.q.val();
        self.ci.next = self.r_ci.q.val();
        self.slot.next = self.r_ci.q.val() & self.r_cfg.q.val().mask;
        self.l_wqe.next = self.rd_resp_data.val();
        self.db_done.next = self.dbs.q.val() == DbState::Done;

        // per-QP RAMs: read at the packet's QPN; CMD_WRITE_RQ writes the ring, the doorbell the producer index,
        // the write-back the consumer index
        self.cfg_ram.raddr.next = self.qpn.val().get_bits::<8>(0);
        self.pi_ram.raddr.next = self.qpn.val().get_bits::<8>(0);
        self.ci_ram.raddr.next = self.qpn.val().get_bits::<8>(0);
        self.cfg_ram.we.next = false;
        self.cfg_ram.waddr.next = self.rqs_qpn.val().get_bits::<8>(0);
        self.cfg_ram.wdata.next.base = self.rqs_base.val();
        self.cfg_ram.wdata.next.mask = !(self.ones16.val() << self.rqs_log2.val());
        self.cfg_ram.wdata.next.cqn = self.rqs_cqn.val();
        self.pi_ram.we.next = false;
        self.pi_ram.waddr.next = self.rqdb_qpn.val().get_bits::<8>(0);
        self.pi_ram.wdata.next = self.rqdb_pi.val();
        self.ci_ram.we.next = false;
        self.ci_ram.waddr.next = self.qpn.val().get_bits::<8>(0);
        self.ci_ram.wdata.next = self.r_ci.q.val();

        // the reads: queued in pq_* (add_g sums the slot's address), issued in order, landing in their entry
        self.l_pf_ent.next = (bit_cast::<11, 8>(self.qpn.val().get_bits::<8>(0)) << 3)
            | bit_cast::<11, 3>(self.r_ci.q.val().get_bits::<3>(0));
        self.l_db_ent0.next = bit_cast::<11, 8>(self.db_qpn.q.val()) << 3;
        self.l_db_ent.next = self.l_db_ent0.val() | bit_cast::<11, 3>(self.db_tgt.q.val().get_bits::<3>(0));
        self.gap.a.next = self.r_pi.q.val();
        self.gap.b.next = self.r_ci.q.val();
        self.pf_far.d.next = !self.gap.below.val();
        self.db_off.a.next = self.db_tgt.q.val();
        self.db_off.b.next = self.db_t0.q.val();
        self.pf_ram.raddr.next = self.l_pf_ent.val();
        self.l_pf_idle.next = !self.pq_v.q.val() & self.pfo.empty.val();
        self.idle.next = self.l_pf_idle.val();
        self.l_pf_pend.next = self.pf_ram.rdata.val().pending & (self.pf_ram.rdata.val().ci == self.r_ci.q.val());
        self.l_pf_go.next = self.fetch_pf.val() & self.pf_far.q.val() & !self.pq_v.q.val();
        self.l_pf_hit.next = self.pf_ram.rdata.val().valid & (self.pf_ram.rdata.val().ci == self.r_ci.q.val());
        self.hit.next = self.l_pf_hit.val();
        self.ent.next = self.pf_ram.rdata.val();
        self.l_pf_slot.next = self.ci2.q.val() & self.r_cfg.q.val().mask;
        self.l_pq_ent.next = self.l_pf_ent.val();
        self.l_pq_ci.next = self.ci2.q.val();
        self.l_db_want.next = !self.pf_ram.rdata.val().pending
            & !(self.pf_ram.rdata.val().valid & (self.pf_ram.rdata.val().ci == self.db_tgt.q.val()))
            & (self.db_tgt.q.val() != self.db_pi.q.val());
        self.l_db_go.next = false;
        self.l_pq_base.next = self.r_cfg.q.val().base;
        self.l_pq_load.next = false;
        self.l_pq_miss.next = false;
        self.l_pf_own.next = false;
        if self.pq_cnt.q.val() != self.zero3.val() {
            self.pq_cnt.d.next = self.pq_cnt.q.val() - self.one3.val();
        }
        self.rd_req_valid.next = false;
        self.rd_req_addr.next = self.wqe_addr.val();
        self.rd_resp_ready.next = false;
        self.pfo.push.next = false;
        self.pfo.din.next.ent = self.pq_ent.q.val();
        self.pfo.din.next.ci = self.pq_ci.q.val();
        if self.pq_v.q.val() & (self.pq_cnt.q.val() == self.zero3.val()) & !self.pfo.full.val() {
            self.rd_req_valid.next = true;
            self.rd_req_addr.next = self.add_g.sum.val();
            if self.pq_direct.q.val() {
                self.rd_req_addr.next = self.ag_a.q.val();
            }
            if self.rd_req_ready.val() {
                self.pfo.push.next = true;
                self.pq_v.d.next = false;
            }
        }
        self.pfo.pop.next = false;
        self.pf_ram.we.next = false;
        self.pf_ram.waddr.next = self.pfo.dout.val().ent;
        self.pf_ram.wdata.next.valid = true;
        self.pf_ram.wdata.next.pending = false;
        self.pf_ram.wdata.next.ci = self.pfo.dout.val().ci;
        self.pf_ram.wdata.next.wr_id = self.l_wqe.val().get_bits::<64>(0);
        self.pf_ram.wdata.next.addr = self.l_wqe.val().get_bits::<64>(64);
        self.pf_ram.wdata.next.len = self.l_wqe.val().get_bits::<32>(128);
        self.pf_ram.wdata.next.lkey = self.l_wqe.val().get_bits::<32>(160);
        if !self.pfo.empty.val() {
            self.rd_resp_ready.next = true;
            if self.rd_resp_valid.val() {
                self.pf_ram.we.next = true;
                self.pfo.pop.next = true;
            }
        }

        if self.rqs_go.val() {
            // CMD_WRITE_RQ: ring, CQ, indices reset; the QP's first entry dropped now, the rest by Clr
            self.l_pf_own.next = true;
            self.pf_ram.waddr.next = bit_cast::<11, 8>(self.rqs_qpn.val().get_bits::<8>(0)) << 3;
            self.pf_ram.wdata.next.valid = false;
            self.pf_ram.wdata.next.pending = false;
            self.db_qpn.d.next = self.rqs_qpn.val().get_bits::<8>(0);
            self.db_tgt.d.next = self.one16.val();
            self.dbs.d.next = DbState::Clr;
            self.cfg_ram.we.next = true;
            self.pi_ram.we.next = true;
            self.pi_ram.waddr.next = self.rqs_qpn.val().get_bits::<8>(0);
            self.pi_ram.wdata.next = self.zero16.val();
            self.ci_ram.we.next = true;
            self.ci_ram.waddr.next = self.rqs_qpn.val().get_bits::<8>(0);
            self.ci_ram.wdata.next = self.zero16.val();
        }
        if self.rqdb_go.val() {
            // RQ doorbell: the producer index written; the QP's ring state read for the doorbell engine (Pf)
            self.pi_ram.we.next = true;
            self.cfg_ram.raddr.next = self.rqdb_qpn.val().get_bits::<8>(0);
            self.ci_ram.raddr.next = self.rqdb_qpn.val().get_bits::<8>(0);
            // (read-first: the producer index before this write)
            self.pi_ram.raddr.next = self.rqdb_qpn.val().get_bits::<8>(0);
            self.db_qpn.d.next = self.rqdb_qpn.val().get_bits::<8>(0);
            self.db_pi.d.next = self.rqdb_pi.val();
            self.dbs.d.next = DbState::Pf;
        }
        if self.load.val() {
            self.r_cfg.d.next = self.cfg_ram.rdata.val();
            self.r_pi.d.next = self.pi_ram.rdata.val();
            self.r_ci.d.next = self.ci_ram.rdata.val();
        }
        if self.pre.val() {
            self.ci1.d.next = self.r_ci.q.val() + self.one16.val();
            self.ci2.d.next = self.r_ci.q.val() + self.k_depth16.val();
        }
        if self.ci1_we.val() {
            self.ci1.d.next = self.ci1_in.val();
        }
        if self.fetch.val() {
            if self.l_pf_hit.val() {
                // the WQE at the consumer index is in pf_ram: taken; the entry is dropped, or marks the prefetch
                // of the index PF_DEPTH on, queued in this cycle
                self.l_pf_own.next = true;
                self.pf_ram.waddr.next = self.l_pf_ent.val();
                self.pf_ram.wdata.next.valid = false;
                self.pf_ram.wdata.next.pending = self.l_pf_go.val();
                self.pf_ram.wdata.next.ci = self.ci2.q.val();
                self.l_pq_load.next = self.l_pf_go.val();
                self.f_req.d.next = false;
            } else if !self.l_pf_pend.val() & !self.f_req.q.val() & !self.pq_v.q.val() {
                // not read yet, nor on its way: its read is queued like a prefetch (behind those on their way,
                // not after them) and marked pending in the entry
                self.l_pq_load.next = true;
                self.l_pq_miss.next = true;
                self.f_req.d.next = true;
                self.l_pf_own.next = true;
                self.pf_ram.waddr.next = self.l_pf_ent.val();
                self.pf_ram.wdata.next.valid = false;
                self.pf_ram.wdata.next.pending = true;
                self.pf_ram.wdata.next.ci = self.r_ci.q.val();
            }
        }
        if self.raise.val() {
            self.r_ci.d.next = self.ci1.q.val();
        }
        if self.wb.val() {
            self.ci_ram.we.next = true;
        }
        // The doorbell engine: an RQ doorbell's prefetch reads (Pf..Go) and CMD_WRITE_RQ's entry drops (Clr)
        if self.db_run.val() {
            match self.dbs.q.val() {
                DbState::Pf => {
                    // the doorbell's new ring indices, from the producer index before it (db_tgt) up to the new one
                    // (db_pi), are read into their entries when they lie in the QP's prefetch window: PF_DEPTH
                    // indices from the one it takes next (the consumer index, or the one after it while a SEND holds
                    // the WQE at the consumer index: its entry is the window's last, PF_DEPTH on)
                    self.db_tgt.d.next = self.pi_ram.rdata.val();
                    self.db_t0.d.next = self.ci_ram.rdata.val();
                    if self.have_wqe.val() {
                        self.db_t0.d.next = self.ci_ram.rdata.val() + self.one16.val();
                    }
                    self.dbs.d.next = DbState::Pf2;
                }
                DbState::Pf2 => {
                    // (db_off takes db_tgt - db_t0 into its registers)
                    self.dbs.d.next = DbState::Pf3;
                }
                DbState::Pf3 => {
                    // slots left: PF_DEPTH - offset, none when the offset is PF_DEPTH or more
                    self.db_left.d.next = self.zero4.val();
                    if self.db_off.below.val() {
                        self.db_left.d.next = self.k_depth4.val() - self.db_off.lo4.val();
                    }
                    self.dbs.d.next = DbState::Rd;
                }
                DbState::Rd => {
                    self.cfg_ram.raddr.next = self.db_qpn.q.val();
                    self.pf_ram.raddr.next = self.l_db_ent.val();
                    self.dbs.d.next = DbState::Chk;
                    if (self.db_left.q.val() == self.zero4.val()) | (self.db_tgt.q.val() == self.db_pi.q.val()) {
                        self.dbs.d.next = DbState::Done;
                    }
                }
                DbState::Chk => {
                    // that WQE is posted, not in its entry, no read of it on its way (registered: the ring-index
                    // compare stays out of the state's logic)
                    self.db_w.d.next = self.l_db_want.val();
                    self.cfg_ram.raddr.next = self.db_qpn.q.val();
                    self.dbs.d.next = DbState::Go;
                }
                DbState::Go => {
                    // its read is queued once pq_* is free (else the SEND's take or Fetch reads it as before); then
                    // the next index (nothing but this state queues into the entry meanwhile, and a read landing
                    // lands in an entry with a read on its way, which Chk saw as not wanted)
                    self.cfg_ram.raddr.next = self.db_qpn.q.val();
                    if !(self.db_w.q.val() & self.pq_v.q.val()) {
                        self.l_db_go.next = self.db_w.q.val();
                        self.db_tgt.d.next = self.db_tgt.q.val() + self.one16.val();
                        self.db_left.d.next = self.db_left.q.val() - self.one4.val();
                        self.dbs.d.next = DbState::Rd;
                    }
                }
                DbState::Clr => {
                    // CMD_WRITE_RQ's other entries dropped, one per cycle (db_tgt counts 1..7)
                    self.l_pf_own.next = true;
                    self.pf_ram.waddr.next = self.l_db_ent.val();
                    self.pf_ram.wdata.next.valid = false;
                    self.pf_ram.wdata.next.pending = false;
                    self.db_tgt.d.next = self.db_tgt.q.val() + self.one16.val();
                    if self.db_tgt.q.val().get_bits::<3>(0) == self.seven3.val() {
                        self.dbs.d.next = DbState::Done;
                    }
                }
                DbState::Done => {}
            }
        }
        if self.take.val() {
            self.cfg_ram.raddr.next = self.take_qpn.val().get_bits::<8>(0);
            self.pi_ram.raddr.next = self.take_qpn.val().get_bits::<8>(0);
            self.ci_ram.raddr.next = self.take_qpn.val().get_bits::<8>(0);
        }
        // the doorbell engine's read (Go): into the doorbell QP's entry for db_tgt
        if self.l_db_go.val() {
            self.l_pq_load.next = true;
            self.l_pq_ent.next = self.l_db_ent.val();
            self.l_pq_ci.next = self.db_tgt.q.val();
            self.l_pq_base.next = self.cfg_ram.rdata.val().base;
            self.l_pf_slot.next = self.db_tgt.q.val() & self.cfg_ram.rdata.val().mask;
            self.l_pf_own.next = true;
            self.pf_ram.waddr.next = self.l_pq_ent.val();
            self.pf_ram.wdata.next.valid = false;
            self.pf_ram.wdata.next.pending = true;
            self.pf_ram.wdata.next.ci = self.db_tgt.q.val();
        }
        // a read queued: the prefetch of ci2 at a take, a doorbell's (above), or Fetch's own read of the WQE
        // it needs, from `wqe_addr` directly
        if self.l_pq_load.val() {
            self.pq_v.d.next = true;
            self.pq_ent.d.next = self.l_pq_ent.val();
            self.pq_ci.d.next = self.l_pq_ci.val();
            self.pq_cnt.d.next = self.four3.val();
            self.pq_direct.d.next = false;
            self.ag_a.d.next = self.l_pq_base.val();
            self.ag_b.d.next = bit_cast::<64, 16>(self.l_pf_slot.val()) << 6;
            if self.l_pq_miss.val() {
                self.pq_ci.d.next = self.r_ci.q.val();
                self.pq_cnt.d.next = self.zero3.val();
                self.pq_direct.d.next = true;
                self.ag_a.d.next = self.wqe_addr.val();
            }
        }
        // pf_ram's write port taken by this block: the read landing now (if any) stays a cycle
        if self.l_pf_own.val() {
            self.rd_resp_ready.next = false;
            self.pfo.pop.next = false;
            self.pf_ram.we.next = true;
        }
    }
}
