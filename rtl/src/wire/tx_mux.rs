//! TX frame mux: two AXI4-Stream frame sources onto the MAC's one TX stream, whole frames only.
//!
//! The mux picks a source at a frame boundary (round robin when both have a frame waiting) and stays with it
//! until that frame's `tlast` beat is taken, so frames never interleave. One combinational level: `tready` of
//! the chosen source is the MAC's `tready`.

use rust_hdl::prelude::*;

use crate::common::axis::{AxisSink, AxisSource};

#[derive(LogicBlock, Default)]
pub struct TxFrameMux {
    pub clock: Signal<In, Clock>,
    pub a: AxisSink,
    pub b: AxisSink,
    pub m_axis: AxisSource,
    /// A frame is in progress, from source b when `sel_b`.
    busy: DFF<Bit>,
    sel_b: DFF<Bit>,
    last_b: DFF<Bit>,
    pick_b: Signal<Local, Bit>,
    use_b: Signal<Local, Bit>,
}

impl Logic for TxFrameMux {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, busy, sel_b, last_b);
        // at a boundary: b if only b has a frame, or both do and a went last
        self.pick_b.next = self.b.tvalid.val() & (!self.a.tvalid.val() | !self.last_b.q.val());
        self.use_b.next = self.pick_b.val();
        if self.busy.q.val() {
            self.use_b.next = self.sel_b.q.val();
        }
        self.m_axis.tdata.next = self.a.tdata.val();
        self.m_axis.tkeep.next = self.a.tkeep.val();
        self.m_axis.tlast.next = self.a.tlast.val();
        self.m_axis.tvalid.next = self.a.tvalid.val();
        self.a.tready.next = self.m_axis.tready.val() & !self.use_b.val();
        self.b.tready.next = self.m_axis.tready.val() & self.use_b.val();
        if self.use_b.val() {
            self.m_axis.tdata.next = self.b.tdata.val();
            self.m_axis.tkeep.next = self.b.tkeep.val();
            self.m_axis.tlast.next = self.b.tlast.val();
            self.m_axis.tvalid.next = self.b.tvalid.val();
        }
        if self.m_axis.tvalid.val() & self.m_axis.tready.val() {
            self.busy.d.next = !self.m_axis.tlast.val();
            self.sel_b.d.next = self.use_b.val();
            if !self.busy.q.val() {
                self.last_b.d.next = self.use_b.val();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn frames_from_both_sources_arrive_whole_and_in_order() {
        let mut u = TxFrameMux::default();
        u.connect_all();
        let mut rng = SmallRng::seed_from_u64(9);
        // source s sends frames (s, n) of 1..5 beats; beat data = s << 32 | n << 8 | beat
        let mut pos = [(0u64, 0u64, rng.gen_range(1..5u64)); 2];
        let mut out: Vec<u64> = Vec::new();
        let mut frames = [0u64; 2];
        let mut cur: Option<(u64, u64)> = None;
        for _ in 0..20_000 {
            let valid = [rng.gen_bool(0.6), rng.gen_bool(0.6)];
            for s in 0..2 {
                let (n, beat, len) = pos[s];
                let sink = if s == 0 { &mut u.a } else { &mut u.b };
                sink.tvalid.next = valid[s];
                sink.tdata.next = bits::<512>((s as u64) << 32 | n << 8 | beat);
                sink.tlast.next = beat + 1 == len;
                sink.tkeep.next = bits::<64>(u64::MAX);
            }
            u.m_axis.tready.next = rng.gen_bool(0.7);
            simulate(&mut u, 100);
            let took = [u.a.tready.val() && valid[0], u.b.tready.val() && valid[1]];
            assert!(!(took[0] && took[1]));
            if u.m_axis.tvalid.val() && u.m_axis.tready.val() {
                let d = u.m_axis.tdata.val().get_bits::<64>(0).to_u64();
                let (s, n, beat) = (d >> 32, d >> 8 & 0xFF_FFFF, d & 0xFF);
                match cur {
                    None => {
                        assert_eq!(beat, 0, "a frame starts at its first beat");
                        assert_eq!(n, frames[s as usize], "source {s}'s frames in order");
                        cur = Some((s, n));
                    }
                    Some(c) => assert_eq!(c, (s, n), "no interleaving inside a frame"),
                }
                out.push(d);
                if u.m_axis.tlast.val() {
                    cur = None;
                    frames[s as usize] += 1;
                }
            }
            for s in 0..2 {
                if took[s] {
                    let (n, beat, len) = pos[s];
                    pos[s] = if beat + 1 == len { (n + 1, 0, rng.gen_range(1..5)) } else { (n, beat + 1, len) };
                }
            }
            u.clock.next = false.into();
            simulate(&mut u, 100);
            u.clock.next = true.into();
            simulate(&mut u, 100);
        }
        assert!(frames[0] > 1000 && frames[1] > 1000, "{frames:?}");
    }
}
