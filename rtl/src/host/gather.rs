//! Gather Path: a (host address, length) segment in, its bytes out as a byte-packed payload stream for TX
//! Packet Build's payload port (byte 0 of the payload in `tdata[7:0]` of the first beat, every beat full but
//! the last, `tlast` on the last).
//!
//! - Command side: each segment with a length (1..=4096) becomes one DMA read request (byte address and byte
//!   length as given; the DMA port returns the 64-byte-aligned beats covering them, see
//!   `rnic_driver::host::dma_beats`). The request leaves through a register; its segment's plan (shift = address
//!   mod 64, the bytes missing from the last output beat, and whether a flush beat ends it) goes into a
//!   32-entry FIFO in request order, so up to 32 reads are outstanding while earlier segments still stream.
//! - A segment of length 0 is accepted and dropped: no DMA read and no beat out (TX Packet Build is told the
//!   payload length in its header descriptor and takes no payload beat for 0, see `tx_build.rs`).
//! - Realignment: output beat k is the window {DMA beat k+1, DMA beat k} shifted down by the segment's shift:
//!   the previous beat is registered, the current one comes straight from the DMA port, and one 1024-bit
//!   shift by 8·shift (a 64:1 mux per output byte, 3 LUT6 levels) feeds the output register. Bytes past the
//!   length are zeroed in the last beat.
//! - A segment returns either one beat more than it sends (shift + last-beat bytes > 64) or as many; in the
//!   latter case its last output beat is a flush of the registered beat alone, sent in the same cycle as the
//!   next segment's first DMA beat arrives (that beat sends nothing yet), so back-to-back segments stream
//!   at one beat per cycle; the only bubbles are the extra DMA beats alignment costs.
//! - **Completion buffer.** Response beats go into a 512-beat FIFO in block RAM before the realignment, and a
//!   read is issued only when the buffer has room for every beat it returns (the beats are reserved when the
//!   request leaves; PCIe's rule for an endpoint, which must advertise infinite completion credits). So the
//!   shared DMA read port never waits on this path when TX Packet Build or the MAC is slow: WQE Prefetch's
//!   and the Responder's reads, answered in order behind the gather reads, are not held up by a stalled
//!   payload stream. (Without it, 32 outstanding 4 KiB reads of a 10 Gb/s link's outgoing messages held a
//!   receive-WQE fetch for tens of microseconds and the other RNIC's frames overflowed RX Parse.)
//!   The count and the room flag are registers (no add or compare between the port's ready and a register),
//!   so the flag lags by up to three reads of up to 65 beats: a read may go while at most 252 beats are
//!   reserved (512 - 4 x 65), half again a 500 ns host round trip at one beat per cycle, so reads of
//!   every size still stream one per cycle.
//! - **Inline segments** (`g_inl`): no DMA read and no reservation; the segment's beats are the next ones of
//!   the inline data stream (`i_*`, WQE Check's inline buffer: an inline WQE's data slots, byte 0 of the payload
//!   at byte 0 of the first, `i_last` on its last), taken in segment order in place of the completion buffer's
//!   (the segment plan says which source is in turn), shift 0; bytes past the length zeroed as for any segment.
//! - `rd_resp_tag` is not used: responses come back in request order.

use crate::common::axis::{AxisSource, KeepMask};
use crate::common::consts::{k, keep_thermo};
use crate::common::fifo::{BramFifo, Fifo};
use rust_hdl::prelude::*;

use crate::common::ports::DmaRead;

/// Beats of the completion buffer.
pub const GATHER_BUF_BEATS: u64 = 512;
/// Beats one read can return at most (4,096 bytes from an unaligned address).
const MAX_READ_BEATS: u64 = 65;
/// A read may be issued while at most this many beats are reserved: the buffer less the read itself and the
/// three reads the registered count may not show yet, each as large as a read can be.
pub const GATHER_RESERVE_LIMIT: u64 = GATHER_BUF_BEATS - 4 * MAX_READ_BEATS;

/// One DMA response beat as the completion buffer holds it.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct GatherBeat {
    pub data: Bits<512>,
    pub last: Bit,
}

/// The plan of one segment, queued in request order.
#[derive(Copy, Clone, Debug, PartialEq, Default, LogicStruct)]
pub struct GatherSeg {
    /// Address mod 64: the shift down, in bytes.
    pub shift: Bits<6>,
    /// Bytes missing from the last output beat: (64 - len mod 64) mod 64.
    pub nk: Bits<6>,
    /// The DMA returns as many beats as go out (shift <= nk): the last output beat is a flush.
    pub flush: Bit,
    /// Inline: the beats come from the inline data stream, not from the completion buffer.
    pub inl: Bit,
}

crate::logic_block! {
    /// Gather Path (see the module documentation).
    pub struct GatherPath {
        pub clock: Signal<In, Clock>,
        /// Segments: host byte address, length in bytes (0..=4096), a tag for the DMA read.
        pub g_valid: Signal<In, Bit>,
        pub g_ready: Signal<Out, Bit>,
        pub g_addr: Signal<In, Bits<64>>,
        pub g_len: Signal<In, Bits<13>>,
        pub g_tag: Signal<In, Bits<8>>,
        /// The segment is inline: its `g_len` bytes are the next beats of the inline data stream (`i_*`), from
        /// byte 0 of the first, `i_last` on its last; no DMA read. `g_addr` is not used.
        pub g_inl: Signal<In, Bit>,
        /// The inline data stream (WQE Check's data slots, in the order of the inline segments).
        pub i_valid: Signal<In, Bit>,
        pub i_ready: Signal<Out, Bit>,
        pub i_data: Signal<In, Bits<512>>,
        pub i_last: Signal<In, Bit>,
        /// DMA read requests: byte address and byte length of the segment.
        pub dma: DmaRead,
        /// The payload stream.
        pub m_axis: AxisSource,

        // command side
        rq_valid: DFF<Bit>,
        rq_addr: DFF<Bits<64>>,
        rq_len: DFF<Bits<13>>,
        rq_tag: DFF<Bits<8>>,
        segs: Fifo<GatherSeg, 5, 6>,
        /// the segment's end within its first beat's line (address mod 64 + length), at the request register, in
        /// two parts so that no wide add follows the Gather command's source mux (the whole top's worst path ran
        /// from the TX arbiter's choice through a 14-bit add): `rq_lo` = address mod 64 + length mod 64 (0..126),
        /// `rq_hi` = length / 64; the end is `64 * rq_hi + rq_lo`
        rq_lo: DFF<Bits<7>>,
        rq_hi: DFF<Bits<8>>,
        l_beats_a: Signal<Local, Bits<8>>,
        /// the completion buffer has room for the largest read (registered)
        room: DFF<Bit>,
        fire: Signal<Local, Bit>,
        l_beats: Signal<Local, Bits<8>>,
        /// completion buffer and its reservation count: beats issued (registered one cycle late), beats popped,
        /// their difference
        cbuf: BramFifo<GatherBeat, 9, 10>,
        fired: DFF<Bits<7>>,
        issued: DFF<Bits<10>>,
        popped: DFF<Bits<10>>,
        inuse: DFF<Bits<10>>,
        c_valid: Signal<Local, Bit>,
        c_data: Signal<Local, Bits<512>>,
        c_last: Signal<Local, Bit>,
        c_ready: Signal<Local, Bit>,
        /// The beats of the segment being sent (or starting) come from the inline stream.
        c_inl: Signal<Local, Bit>,
        req_free: Signal<Local, Bit>,
        accept: Signal<Local, Bit>,
        nonzero: Signal<Local, Bit>,
        new_shift: Signal<Local, Bits<6>>,
        new_nk: Signal<Local, Bits<6>>,
        // realignment
        /// Inside a segment: its first DMA beat taken, its last not yet.
        mid: DFF<Bit>,
        /// A flush beat is owed for the segment whose last DMA beat is in `prev`.
        owe: DFF<Bit>,
        shift: DFF<Bits<6>>,
        nk: DFF<Bits<6>>,
        flush: DFF<Bit>,
        /// The segment inside which `mid` is is inline.
        cinl: DFF<Bit>,
        prev: DFF<Bits<512>>,
        sbits: Signal<Local, Bits<10>>,
        win: Signal<Local, Bits<1024>>,
        wsh: Signal<Local, Bits<1024>>,
        shifted: Signal<Local, Bits<512>>,
        keep: Signal<Local, Bits<64>>,
        kmask: KeepMask,
        can_out: Signal<Local, Bit>,
        need_out: Signal<Local, Bit>,
        take: Signal<Local, Bit>,
        out_fire: Signal<Local, Bit>,
        out_last: Signal<Local, Bit>,
        // output register
        o_valid: DFF<Bit>,
        o_data: DFF<Bits<512>>,
        o_keep: DFF<Bits<64>>,
        o_last: DFF<Bit>,

        k0_6: Constant<Bits<6>> = k(0),
        k0_13: Constant<Bits<13>> = k(0),
        k0_7: Constant<Bits<7>> = k(0),
        k1_8: Constant<Bits<8>> = k(1),
        k1_10: Constant<Bits<10>> = k(1),
        k_lim: Constant<Bits<10>> = k(GATHER_RESERVE_LIMIT),
        kfull: Constant<Bits<64>> = keep_thermo(64),
    }
}

impl Logic for GatherPath {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(
            self, clock, rq_valid, rq_addr, rq_len, rq_tag, rq_lo, rq_hi, room, fired, issued, popped, inuse, mid, owe,
            shift, nk, flush, cinl, prev, o_valid, o_data, o_keep, o_last
        );
        clock!(self, clock, segs, cbuf);

        // ---- command side: one DMA read per segment with a length, its plan queued in request order ----
        // the request register holds a read until the completion buffer has room for it
        self.fire.next = self.rq_valid.q.val() & self.room.q.val() & self.dma.req_ready.val();
        self.req_free.next = !self.rq_valid.q.val() | self.fire.val();
        self.g_ready.next = self.req_free.val() & !self.segs.full.val();
        self.accept.next = self.g_valid.val() & self.req_free.val() & !self.segs.full.val();
        self.nonzero.next = self.g_len.val() != self.k0_13.val();
        self.new_shift.next = self.g_addr.val().get_bits::<6>(0);
        self.new_nk.next = self.k0_6.val() - self.g_len.val().get_bits::<6>(0);
        self.segs.din.next.shift = self.new_shift.val();
        self.segs.din.next.nk = self.new_nk.val();
        // shift + (64 - nk) <= 64: the beats the DMA returns are exactly the beats that go out
        self.segs.din.next.flush = self.new_shift.val() <= self.new_nk.val();
        self.segs.din.next.inl = self.g_inl.val();
        if self.g_inl.val() {
            // inline data starts at byte 0 of its first beat
            self.segs.din.next.shift = self.k0_6.val();
            self.segs.din.next.flush = true;
        }
        self.segs.push.next = self.accept.val() & self.nonzero.val();
        if self.req_free.val() {
            self.rq_valid.d.next = self.accept.val() & self.nonzero.val() & !self.g_inl.val();
            self.rq_addr.d.next = self.g_addr.val();
            self.rq_len.d.next = self.g_len.val();
            self.rq_tag.d.next = self.g_tag.val();
            self.rq_lo.d.next = bit_cast::<7, 6>(self.new_shift.val()) + bit_cast::<7, 6>(self.g_len.val().get_bits::<6>(0));
            self.rq_hi.d.next = bit_cast::<8, 7>(self.g_len.val().get_bits::<7>(6));
        }
        self.dma.req_valid.next = self.rq_valid.q.val() & self.room.q.val();
        self.dma.req_addr.next = self.rq_addr.q.val();
        self.dma.req_len.next = self.rq_len.q.val();
        self.dma.req_tag.next = self.rq_tag.q.val();
        // the reservation count: beats issued (one cycle late) - beats popped, registered; the room flag from it
        // beats of the read = ceil(end / 64)
        self.l_beats_a.next = self.rq_hi.q.val() + bit_cast::<8, 1>(self.rq_lo.q.val().get_bits::<1>(6));
        self.l_beats.next = self.l_beats_a.val();
        if self.rq_lo.q.val().get_bits::<6>(0) != self.k0_6.val() {
            self.l_beats.next = self.l_beats_a.val() + self.k1_8.val();
        }
        self.fired.d.next = self.k0_7.val();
        if self.fire.val() {
            self.fired.d.next = self.l_beats.val().get_bits::<7>(0);
        }
        self.room.d.next = self.inuse.q.val() <= self.k_lim.val();
        self.issued.d.next = self.issued.q.val() + bit_cast::<10, 7>(self.fired.q.val());
        self.inuse.d.next = self.issued.q.val() - self.popped.q.val();

        // ---- completion buffer: every response beat is taken (its room was reserved) ----
        self.dma.resp_ready.next = !self.cbuf.full.val();
        self.cbuf.push.next = self.dma.resp_valid.val();
        self.cbuf.din.next.data = self.dma.resp_data.val();
        self.cbuf.din.next.last = self.dma.resp_last.val();
        // the beats of the segment in turn: the completion buffer's or, for an inline segment, the inline
        // stream's (both in segment order)
        self.c_inl.next = self.segs.dout.val().inl;
        if self.mid.q.val() {
            self.c_inl.next = self.cinl.q.val();
        }
        self.c_valid.next = !self.cbuf.empty.val();
        self.c_data.next = self.cbuf.dout.val().data;
        self.c_last.next = self.cbuf.dout.val().last;
        if self.c_inl.val() {
            self.c_valid.next = self.i_valid.val();
            self.c_data.next = self.i_data.val();
            self.c_last.next = self.i_last.val();
        }

        // ---- realignment: output beat = {current DMA beat, previous one} >> 8*shift ----
        self.can_out.next = !self.o_valid.q.val() | self.m_axis.tready.val();
        // a DMA beat inside a segment, or an owed flush, sends a beat; a segment's first beat does not
        self.need_out.next = self.owe.q.val() | self.mid.q.val();
        self.c_ready.next =
            (!self.need_out.val() | self.can_out.val()) & (self.mid.q.val() | !self.segs.empty.val());
        self.take.next = self.c_valid.val() & self.c_ready.val();
        self.cbuf.pop.next = self.c_ready.val() & !self.c_inl.val();
        self.i_ready.next = self.c_ready.val() & self.c_inl.val();
        if self.take.val() & !self.c_inl.val() {
            self.popped.d.next = self.popped.q.val() + self.k1_10.val();
        }
        self.out_fire.next =
            self.can_out.val() & (self.owe.q.val() | (self.mid.q.val() & self.c_valid.val()));
        self.out_last.next = self.owe.q.val() | (self.c_last.val() & !self.flush.q.val());

        self.sbits.next = bit_cast::<10, 6>(self.shift.q.val()) << 3;
        self.win.next = bit_cast::<1024, 512>(self.prev.q.val()) | (bit_cast::<1024, 512>(self.c_data.val()) << 512);
        self.wsh.next = self.win.val() >> self.sbits.val();
        self.shifted.next = self.wsh.val().get_bits::<512>(0);
        self.keep.next = self.kfull.val();
        if self.out_last.val() {
            self.keep.next = self.kfull.val() >> self.nk.q.val();
        }
        self.kmask.keep.next = self.keep.val();

        if self.can_out.val() {
            self.o_valid.d.next = self.out_fire.val();
            self.o_data.d.next = self.shifted.val() & self.kmask.mask.val();
            self.o_keep.d.next = self.keep.val();
            self.o_last.d.next = self.out_last.val();
        }
        if self.owe.q.val() & self.can_out.val() {
            self.owe.d.next = false;
        }
        self.segs.pop.next = false;
        if self.take.val() {
            self.prev.d.next = self.c_data.val();
            self.mid.d.next = !self.c_last.val();
            if self.mid.q.val() {
                if self.c_last.val() {
                    self.owe.d.next = self.flush.q.val();
                }
            } else {
                // a segment's first beat: its plan leaves the FIFO
                self.segs.pop.next = true;
                self.shift.d.next = self.segs.dout.val().shift;
                self.nk.d.next = self.segs.dout.val().nk;
                self.flush.d.next = self.segs.dout.val().flush;
                self.cinl.d.next = self.segs.dout.val().inl;
                if self.c_last.val() {
                    self.owe.d.next = self.segs.dout.val().flush;
                }
            }
        }

        self.m_axis.tvalid.next = self.o_valid.q.val();
        self.m_axis.tdata.next = self.o_data.q.val();
        self.m_axis.tkeep.next = self.o_keep.q.val();
        self.m_axis.tlast.next = self.o_last.q.val();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::common::axis::beat_of;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::VecDeque;
    use rnic_driver::host::{dma_beats, DMA_BEAT_BYTES, DMA_MAX_BYTES};

    /// Where the test memory sits in the host address space: index i of the memory is address HOST + i. Its
    /// 64 KiB straddle 2^60, so a command crossing there carries through every bit of the beat address.
    pub(crate) const HOST: u64 = 0x0FFF_FFFF_FFFF_8000;

    /// One segment to gather (`addr` an index into the test memory; the block sees HOST + addr).
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct Seg {
        pub addr: u64,
        pub len: usize,
        pub tag: u8,
    }

    /// How often each side is willing (out of 1000), and the DMA read latency in cycles.
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct Pace {
        pub cmd: u32,
        pub req_ready: u32,
        pub resp_valid: u32,
        pub out_ready: u32,
        pub latency: u64,
    }

    pub(crate) const FLAT_OUT: Pace = Pace { cmd: 1000, req_ready: 1000, resp_valid: 1000, out_ready: 1000, latency: 12 };
    pub(crate) const RANDOM: Pace = Pace { cmd: 600, req_ready: 700, resp_valid: 750, out_ready: 700, latency: 9 };

    pub(crate) fn bytes_of(d: &Bits<512>) -> [u8; 64] {
        let mut b = [0u8; 64];
        for i in 0..16 {
            let w = d.get_bits::<32>(32 * i).to_u32();
            b[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    pub(crate) fn keep_u64(k: &Bits<64>) -> u64 {
        k.get_bits::<32>(0).to_u64() | k.get_bits::<32>(32).to_u64() << 32
    }

    /// The host memory's read side: requests accepted in order, answered in order after `latency` cycles with
    /// the 64-byte-aligned beats covering them (random gaps).
    pub(crate) struct DmaReader {
        queue: VecDeque<(u64, u64, u32, u8)>,
        beat: u32,
        pub issued: usize,
        pub max_outstanding: usize,
        /// beats requested and not yet delivered, the most of them, and cycles a beat was offered and refused
        beats_out: usize,
        pub max_beats_out: usize,
        pub refused: usize,
        valid: bool,
    }

    impl DmaReader {
        pub fn new() -> Self {
            DmaReader {
                queue: VecDeque::new(),
                beat: 0,
                issued: 0,
                max_outstanding: 0,
                beats_out: 0,
                max_beats_out: 0,
                refused: 0,
                valid: false,
            }
        }

        /// Drive the read ports for this cycle (before the combinational settle).
        pub fn drive(&mut self, u: &mut GatherPath, mem: &[u8], cycle: u64, pace: &Pace, rng: &mut SmallRng) {
            u.dma.req_ready.next = rng.gen_ratio(pace.req_ready, 1000);
            self.valid = false;
            if let Some(&(at, addr, len, tag)) = self.queue.front() {
                if at <= cycle && rng.gen_ratio(pace.resp_valid, 1000) {
                    let base = (addr as usize / DMA_BEAT_BYTES + self.beat as usize) * DMA_BEAT_BYTES;
                    let (d, _) = beat_of(&mem[base..base + DMA_BEAT_BYTES]);
                    u.dma.resp_data.next = d;
                    u.dma.resp_tag.next = bits::<8>(tag as u64);
                    u.dma.resp_last.next = self.beat + 1 == dma_beats(addr, len);
                    self.valid = true;
                }
            }
            if !self.valid {
                // garbage on an idle bus: it must not be taken
                u.dma.resp_data.next = beat_of(&[0xEE; 64]).0;
                u.dma.resp_last.next = rng.gen();
            }
            u.dma.resp_valid.next = self.valid;
        }

        /// After the settle: requests and beats that moved this cycle. `expect` yields the requests in order.
        pub fn sample(&mut self, u: &GatherPath, cycle: u64, pace: &Pace, expect: &mut impl FnMut() -> Option<Seg>) {
            if u.dma.req_valid.val() && u.dma.req_ready.val() {
                let want = expect().expect("a DMA read request for a segment that does not need one");
                let addr = u.dma.req_addr.val().to_u64().wrapping_sub(HOST);
                let len = u.dma.req_len.val().to_u32();
                assert_eq!((addr, len as usize, u.dma.req_tag.val().to_u8()), (want.addr, want.len, want.tag), "read request");
                assert!(len >= 1 && len as usize <= DMA_MAX_BYTES);
                self.queue.push_back((cycle + pace.latency, addr, len, want.tag));
                self.issued += 1;
                self.beats_out += dma_beats(addr, len) as usize;
            }
            self.max_outstanding = self.max_outstanding.max(self.queue.len());
            self.max_beats_out = self.max_beats_out.max(self.beats_out);
            if self.valid && !u.dma.resp_ready.val() {
                self.refused += 1;
            }
            if self.valid && u.dma.resp_ready.val() {
                self.beats_out -= 1;
                let &(_, addr, len, _) = self.queue.front().unwrap();
                self.beat += 1;
                if self.beat == dma_beats(addr, len) {
                    self.queue.pop_front();
                    self.beat = 0;
                }
            }
        }

        pub fn idle(&self) -> bool {
            self.queue.is_empty()
        }
    }

    /// What came out: the beats of the stream (data, keep, last) and the cycle each left.
    pub(crate) struct Run {
        pub beats: Vec<([u8; 64], u64, bool, u64)>,
        pub cycles: u64,
        pub max_outstanding: usize,
        pub max_beats_out: usize,
        pub refused: usize,
    }

    /// Gather `segs` from `mem` under `pace`; runs until every expected beat is out, then a few cycles more.
    pub(crate) fn run_gather(mem: &[u8], segs: &[Seg], pace: Pace, seed: u64) -> Run {
        run_gather_inl(mem, segs, &vec![false; segs.len()], pace, seed)
    }

    /// As [`run_gather`], segment i inline when `inl[i]`: its beats (the 64-byte lines of `mem` from its
    /// address, bytes past its length left as they are) come on the inline stream under the DMA's pace.
    pub(crate) fn run_gather_inl(mem: &[u8], segs: &[Seg], inl: &[bool], pace: Pace, seed: u64) -> Run {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut u = GatherPath::default();
        u.connect_all();
        let want_beats: usize = segs.iter().map(|s| s.len.div_ceil(64)).sum();
        let mut dma = DmaReader::new();
        let mut reqs = segs.iter().zip(inl).filter(|(s, &i)| s.len > 0 && !i).map(|(s, _)| *s).collect::<Vec<_>>().into_iter();
        let mut next_req = move || reqs.next();
        let mut ibeats: VecDeque<(Bits<512>, bool)> = VecDeque::new();
        for (s, _) in segs.iter().zip(inl).filter(|(_, &i)| i) {
            let nb = s.len.div_ceil(64);
            for j in 0..nb {
                let at = s.addr as usize + 64 * j;
                ibeats.push_back((beat_of(&mem[at..at + 64]).0, j + 1 == nb));
            }
        }
        let mut si = 0;
        let mut beats = Vec::new();
        let mut stalled: Option<([u8; 64], u64, bool)> = None;
        let mut cycle = 0u64;
        let mut after = 0;
        let (mut seen, mut progress) = (0, 0);
        loop {
            let gv = si < segs.len() && rng.gen_ratio(pace.cmd, 1000);
            u.g_valid.next = gv;
            let s = segs[si.min(segs.len() - 1)];
            u.g_addr.next = bits::<64>(HOST.wrapping_add(s.addr));
            u.g_len.next = bits::<13>(s.len as u64);
            u.g_tag.next = bits::<8>(s.tag as u64);
            u.g_inl.next = inl[si.min(segs.len() - 1)];
            dma.drive(&mut u, mem, cycle, &pace, &mut rng);
            let iv = !ibeats.is_empty() && rng.gen_ratio(pace.resp_valid, 1000);
            u.i_valid.next = iv;
            if iv {
                u.i_data.next = ibeats[0].0;
                u.i_last.next = ibeats[0].1;
            } else {
                // garbage on an idle stream: it must not be taken
                u.i_data.next = beat_of(&[0xDD; 64]).0;
                u.i_last.next = rng.gen();
            }
            u.m_axis.tready.next = rng.gen_ratio(pace.out_ready, 1000);
            u.clock.next = false.into();
            assert!(simulate(&mut u, 50));
            if gv && u.g_ready.val() {
                si += 1;
            }
            dma.sample(&u, cycle, &pace, &mut next_req);
            if iv && u.i_ready.val() {
                ibeats.pop_front();
            }
            if u.m_axis.tvalid.val() {
                let b = (bytes_of(&u.m_axis.tdata.val()), keep_u64(&u.m_axis.tkeep.val()), u.m_axis.tlast.val());
                if let Some(s) = stalled {
                    assert_eq!(s, b, "cycle {cycle}: the output beat changed while stalled");
                }
                stalled = None;
                if u.m_axis.tready.val() {
                    beats.push((b.0, b.1, b.2, cycle));
                } else {
                    stalled = Some(b);
                }
            } else {
                assert!(stalled.is_none(), "cycle {cycle}: tvalid dropped while stalled");
            }
            u.clock.next = true.into();
            assert!(simulate(&mut u, 50));
            cycle += 1;
            if beats.len() > seen {
                seen = beats.len();
                progress = cycle;
            }
            assert!(cycle - progress < 2_000, "gather stopped: {} of {want_beats} beats", beats.len());
            if beats.len() >= want_beats && si == segs.len() && dma.idle() && ibeats.is_empty() {
                after += 1;
                if after == 20 {
                    break;
                }
            }
        }
        assert!(next_req().is_none(), "a segment's DMA read was never issued");
        assert!(ibeats.is_empty(), "{} inline beats were never taken", ibeats.len());
        Run {
            beats,
            cycles: cycle,
            max_outstanding: dma.max_outstanding,
            max_beats_out: dma.max_beats_out,
            refused: dma.refused,
        }
    }

    /// Every segment's bytes, in order, exactly: full keep but on the last beat, tlast on the last beat only,
    /// zeros past the last byte, nothing for a length of 0, nothing more.
    pub(crate) fn check_stream(mem: &[u8], segs: &[Seg], beats: &[([u8; 64], u64, bool, u64)]) {
        let mut it = beats.iter();
        for (n, s) in segs.iter().enumerate() {
            let nb = s.len.div_ceil(64);
            for j in 0..nb {
                let (data, keep, last, cycle) = it.next().unwrap_or_else(|| panic!("segment {n} {s:?}: beat {j} missing"));
                let bytes = (s.len - 64 * j).min(64);
                let want_keep = if bytes == 64 { u64::MAX } else { (1u64 << bytes) - 1 };
                assert_eq!(*keep, want_keep, "segment {n} {s:?} beat {j} (cycle {cycle}): tkeep");
                assert_eq!(*last, j + 1 == nb, "segment {n} {s:?} beat {j} (cycle {cycle}): tlast");
                let at = s.addr as usize + 64 * j;
                assert_eq!(&data[..bytes], &mem[at..at + bytes], "segment {n} {s:?} beat {j} (cycle {cycle}): data");
                assert!(data[bytes..].iter().all(|&b| b == 0), "segment {n} {s:?} beat {j}: bytes past the end not zero");
            }
        }
        assert!(it.next().is_none(), "beats after the last segment");
    }

    pub(crate) fn random_mem(rng: &mut SmallRng, n: usize) -> Vec<u8> {
        (0..n).map(|_| rng.gen()).collect()
    }

    /// Segments at every alignment 0..63 with the edge lengths (0, 1, 63, 64, 65, 4095, 4096) and random ones.
    pub(crate) fn edge_segs(rng: &mut SmallRng, mem_len: usize, n: usize, max_len: usize) -> Vec<Seg> {
        const EDGE: [usize; 7] = [0, 1, 63, 64, 65, 4095, 4096];
        (0..n)
            .map(|i| {
                let len = if i % 2 == 0 && EDGE[(i / 2) % 7] <= max_len { EDGE[(i / 2) % 7] } else { rng.gen_range(0..=max_len) };
                let align = (i * 37) % 64; // every alignment within 64 segments, in a scrambled order
                let lines = (mem_len - len - 64) / 64;
                Seg { addr: (64 * rng.gen_range(0..lines) + align) as u64, len, tag: rng.gen() }
            })
            .collect()
    }

    #[test]
    fn gather_every_alignment_and_edge_length_under_backpressure() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mem = random_mem(&mut rng, 1 << 16);
        let segs = edge_segs(&mut rng, mem.len(), 70, DMA_MAX_BYTES);
        assert!(segs.iter().any(|s| s.len == 4096) && segs.iter().any(|s| s.len == 0));
        let r = run_gather(&mem, &segs, RANDOM, 1);
        eprintln!("{} beats in {} cycles, {} reads outstanding at most", r.beats.len(), r.cycles, r.max_outstanding);
        check_stream(&mem, &segs, &r.beats);
    }

    #[test]
    fn gather_short_segments_back_to_back() {
        // many segment boundaries: every alignment, lengths 0..=200, random backpressure everywhere
        let mut rng = SmallRng::seed_from_u64(8);
        let mem = random_mem(&mut rng, 1 << 14);
        let segs = edge_segs(&mut rng, mem.len(), 300, 200);
        let r = run_gather(&mem, &segs, RANDOM, 2);
        check_stream(&mem, &segs, &r.beats);
        // and flat out
        let r = run_gather(&mem, &segs, FLAT_OUT, 3);
        check_stream(&mem, &segs, &r.beats);
    }

    #[test]
    fn gather_streams_one_beat_per_cycle() {
        let mut rng = SmallRng::seed_from_u64(9);
        let mem = random_mem(&mut rng, 1 << 16);
        // aligned segments: the DMA returns exactly the beats that go out, so no bubble at all
        let aligned: Vec<Seg> =
            (0..24).map(|i| Seg { addr: 64 * rng.gen_range(0..900), len: [64, 1, 4096, 100, 65, 63][i % 6], tag: i as u8 }).collect();
        // unaligned: the output may only wait for the extra DMA beats alignment costs
        let unaligned: Vec<Seg> = (0..40)
            .map(|i| Seg { addr: 64 * rng.gen_range(0..900) + rng.gen_range(0..64), len: rng.gen_range(1..=1500), tag: i as u8 })
            .collect();
        for segs in [aligned, unaligned] {
            let r = run_gather(&mem, &segs, FLAT_OUT, 4);
            check_stream(&mem, &segs, &r.beats);
            let dma: u64 = segs.iter().map(|s| dma_beats(s.addr, s.len as u32) as u64).sum();
            let first = r.beats.first().unwrap().3;
            let last = r.beats.last().unwrap().3;
            // output beats leave in one burst lasting no longer than the DMA beats take to arrive
            assert!(last - first + 1 <= dma, "{} cycles for {dma} DMA beats", last - first + 1);
            if segs.iter().all(|s| s.addr % 64 == 0) {
                assert_eq!(last - first + 1, r.beats.len() as u64, "aligned segments stream without a bubble");
            }
            assert!(r.max_outstanding >= 2, "the next read is issued while a segment streams");
        }
    }

    /// The completion buffer: with the payload stream taking a beat in 20 and the DMA port offering every beat
    /// at once, no response beat is ever refused (the shared read port never waits on this path), the beats
    /// in flight stay within the buffer, the reads still run ahead (the buffer is used), and the stream is
    /// exact. Without the buffer the port waits on the stalled output (the refusal count).
    #[test]
    fn gather_never_refuses_a_response_beat() {
        let mut rng = SmallRng::seed_from_u64(10);
        let mem = random_mem(&mut rng, 1 << 16);
        let segs = edge_segs(&mut rng, mem.len(), 120, DMA_MAX_BYTES);
        let slow = Pace { cmd: 1000, req_ready: 1000, resp_valid: 1000, out_ready: 50, latency: 30 };
        let r = run_gather(&mem, &segs, slow, 5);
        check_stream(&mem, &segs, &r.beats);
        eprintln!("{} beats in flight at most, {} reads outstanding at most", r.max_beats_out, r.max_outstanding);
        assert_eq!(r.refused, 0, "the DMA port waited on a response beat");
        assert!(r.max_beats_out as u64 <= GATHER_BUF_BEATS, "{} beats in flight", r.max_beats_out);
        assert!(r.max_beats_out as u64 > GATHER_RESERVE_LIMIT / 2, "the reads did not run ahead: {}", r.max_beats_out);
    }

    /// Inline segments (beats from the inline stream, no DMA read: a read for one fails `DmaReader::sample`)
    /// between DMA segments of every alignment: every segment's bytes in order, bytes past an inline
    /// segment's length zeroed, under random backpressure and flat out.
    #[test]
    fn gather_takes_inline_segments_from_the_inline_stream_in_order() {
        let mut rng = SmallRng::seed_from_u64(11);
        let mem = random_mem(&mut rng, 1 << 15);
        let mut segs = edge_segs(&mut rng, mem.len(), 300, 1500);
        segs[3].len = 256;
        let mut inl: Vec<bool> = segs.iter().map(|s| s.len <= 256 && rng.gen_bool(0.5)).collect();
        inl[3] = true;
        inl[segs.iter().position(|s| s.len == 0).unwrap()] = true;
        assert!(inl.iter().filter(|&&i| i).count() > 40);
        assert!(segs.iter().zip(&inl).any(|(s, &i)| i && s.len == 0) && segs.iter().zip(&inl).any(|(s, &i)| i && s.len == 256));
        for (pace, seed) in [(RANDOM, 12), (FLAT_OUT, 13)] {
            let r = run_gather_inl(&mem, &segs, &inl, pace, seed);
            check_stream(&mem, &segs, &r.beats);
        }
        // all inline, flat out: one beat per cycle
        let small: Vec<Seg> = segs.iter().copied().filter(|s| s.len > 0 && s.len <= 256).collect();
        let r = run_gather_inl(&mem, &small, &vec![true; small.len()], FLAT_OUT, 14);
        check_stream(&mem, &small, &r.beats);
        let (first, last) = (r.beats.first().unwrap().3, r.beats.last().unwrap().3);
        assert_eq!(last - first + 1, r.beats.len() as u64, "inline segments stream without a bubble");
    }
}
