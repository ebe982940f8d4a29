//! DMA read arbiter: two requesters (WQE Prefetch and the Gather Path) share the RNIC's one DMA read port.
//!
//! Requests are granted round robin, one per cycle at most; the arbiter remembers, in request order, which
//! source each request came from (a FIFO of source bits, 64 deep: the DMA port's outstanding limit), and routes
//! each response beat to that source (the port answers in request order, `docs/host-interface.md`); a request's
//! `last` beat pops the FIFO. Tags pass through untouched. When the source FIFO is full no request is granted.
//! Chained in the top, three requesters share the port: WQE Prefetch and the Responder (receive WQEs, atomic
//! blocks) on one arbiter, whose output and the Gather Path share the second.

use rust_hdl::prelude::*;

use crate::common::fifo::Fifo;
use crate::common::ports::{DmaRead, DmaReadTarget};

crate::logic_block! {
    pub struct DmaReadArb {
        pub clock: Signal<In, Clock>,
        /// The two requesters (each sees the shared response beat, with its own `resp_valid`).
        pub a: DmaReadTarget,
        pub b: DmaReadTarget,
        /// The port they share.
        pub port: DmaRead,

        order: Fifo<Bit, 6, 7>,
        /// Source 1 had the last grant (round robin).
        last_b: DFF<Bit>,
        grant_b: Signal<Local, Bit>,
    }
}

impl Logic for DmaReadArb {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, last_b);
        self.order.clock.next = self.clock.val();
        // grant: b when only b asks, or both ask and a had the last grant
        self.grant_b.next = self.b.req_valid.val() & (!self.a.req_valid.val() | !self.last_b.q.val());
        self.port.req_valid.next = (self.a.req_valid.val() | self.b.req_valid.val()) & !self.order.full.val();
        self.port.req_addr.next = self.a.req_addr.val();
        self.port.req_len.next = self.a.req_len.val();
        self.port.req_tag.next = self.a.req_tag.val();
        if self.grant_b.val() {
            self.port.req_addr.next = self.b.req_addr.val();
            self.port.req_len.next = self.b.req_len.val();
            self.port.req_tag.next = self.b.req_tag.val();
        }
        self.a.req_ready.next = self.port.req_ready.val() & !self.order.full.val() & !self.grant_b.val();
        self.b.req_ready.next = self.port.req_ready.val() & !self.order.full.val() & self.grant_b.val();
        self.order.din.next = self.grant_b.val();
        self.order.push.next = self.port.req_valid.val() & self.port.req_ready.val();
        if self.port.req_valid.val() & self.port.req_ready.val() {
            self.last_b.d.next = self.grant_b.val();
        }
        // responses to the source at the head of the order FIFO
        self.a.resp_data.next = self.port.resp_data.val();
        self.a.resp_tag.next = self.port.resp_tag.val();
        self.a.resp_last.next = self.port.resp_last.val();
        self.b.resp_data.next = self.port.resp_data.val();
        self.b.resp_tag.next = self.port.resp_tag.val();
        self.b.resp_last.next = self.port.resp_last.val();
        self.a.resp_valid.next = self.port.resp_valid.val() & !self.order.empty.val() & !self.order.dout.val();
        self.b.resp_valid.next = self.port.resp_valid.val() & !self.order.empty.val() & self.order.dout.val();
        self.port.resp_ready.next = !self.order.empty.val()
            & ((!self.order.dout.val() & self.a.resp_ready.val()) | (self.order.dout.val() & self.b.resp_ready.val()));
        self.order.pop.next = self.port.resp_valid.val() & self.port.resp_ready.val() & self.port.resp_last.val();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::VecDeque;

    #[test]
    fn both_sources_get_their_own_responses_in_order_and_neither_starves() {
        let mut u = DmaReadArb::default();
        u.connect_all();
        let mut rng = SmallRng::seed_from_u64(3);
        // requests: (source, addr, beats)
        let mut next_addr = [0u64, 1 << 40];
        let mut port: VecDeque<(u64, u64, u8)> = VecDeque::new(); // addr, beats left, tag
        let mut expect: [VecDeque<(u64, u64)>; 2] = [VecDeque::new(), VecDeque::new()];
        let mut got = [0usize; 2];
        let mut granted = [0usize; 2];
        let mut max_gap = [0usize; 2];
        let mut gap = [0usize; 2];
        let (mut cur_beat, mut cur) = (0u64, None::<(u64, u64, u8)>);
        for cycle in 0..20_000 {
            let av = rng.gen_bool(0.8);
            let bv = rng.gen_bool(0.8);
            let beats = [rng.gen_range(1..4u64), rng.gen_range(1..4u64)];
            u.a.req_valid.next = av;
            u.a.req_addr.next = bits(next_addr[0]);
            u.a.req_len.next = bits(beats[0] * 64);
            u.a.req_tag.next = bits(0xA0);
            u.b.req_valid.next = bv;
            u.b.req_addr.next = bits(next_addr[1]);
            u.b.req_len.next = bits(beats[1] * 64);
            u.b.req_tag.next = bits(0xB0);
            u.port.req_ready.next = rng.gen_bool(0.7);
            u.a.resp_ready.next = rng.gen_bool(0.6);
            u.b.resp_ready.next = rng.gen_bool(0.6);
            if cur.is_none() {
                cur = port.pop_front();
                cur_beat = 0;
            }
            u.port.resp_valid.next = cur.is_some() && cycle % 3 != 0;
            if let Some((a, n, t)) = cur {
                u.port.resp_data.next = bits::<512>(a + cur_beat);
                u.port.resp_tag.next = bits(t as u64);
                u.port.resp_last.next = cur_beat + 1 == n;
            }
            simulate(&mut u, 100);
            assert!(!(u.a.req_ready.val() && u.b.req_ready.val()));
            if u.port.req_valid.val() && u.port.req_ready.val() {
                let src = if u.b.req_ready.val() { 1 } else { 0 };
                assert!(if src == 1 { bv } else { av });
                let (a, n) = (u.port.req_addr.val().to_u64(), u.port.req_len.val().to_u64() / 64);
                assert_eq!(a, next_addr[src]);
                port.push_back((a, n, u.port.req_tag.val().to_u64() as u8));
                expect[src].push_back((a, n));
                next_addr[src] += 0x1000;
                granted[src] += 1;
                gap[src] = 0;
            }
            for s in 0..2 {
                let wants = if s == 0 { av } else { bv };
                if wants && !(u.port.req_valid.val() && u.port.req_ready.val() && (u.b.req_ready.val() == (s == 1))) {
                    gap[s] += (u.port.req_valid.val() && u.port.req_ready.val()) as usize;
                    max_gap[s] = max_gap[s].max(gap[s]);
                }
            }
            if u.port.resp_ready.val() && u.port.resp_valid.val() {
                let (a, n, t) = cur.unwrap();
                let src = if u.b.resp_valid.val() { 1 } else { 0 };
                assert!(u.a.resp_valid.val() ^ u.b.resp_valid.val());
                assert_eq!(t, if src == 0 { 0xA0 } else { 0xB0 });
                assert_eq!(u.a.resp_data.val().get_bits::<64>(0).to_u64(), a + cur_beat);
                let &(ea, en) = expect[src].front().unwrap();
                assert_eq!((ea, en), (a, n), "source {src} gets its own response, in order");
                cur_beat += 1;
                if cur_beat == n {
                    expect[src].pop_front();
                    got[src] += 1;
                    cur = None;
                }
            }
            u.clock.next = false.into();
            simulate(&mut u, 100);
            u.clock.next = true.into();
            simulate(&mut u, 100);
        }
        assert!(got[0] > 500 && got[1] > 500, "{got:?}");
        assert!(granted[0].abs_diff(granted[1]) < granted[0] / 5, "round robin: {granted:?}");
        assert!(max_gap[0] <= 2 && max_gap[1] <= 2, "no source waits more than one grant: {max_gap:?}");
    }
}
