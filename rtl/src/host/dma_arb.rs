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

crate::logic_block! {
    pub struct DmaReadArb {
        pub clock: Signal<In, Clock>,
        // source 0
        pub a_req_valid: Signal<In, Bit>,
        pub a_req_ready: Signal<Out, Bit>,
        pub a_req_addr: Signal<In, Bits<64>>,
        pub a_req_len: Signal<In, Bits<13>>,
        pub a_req_tag: Signal<In, Bits<8>>,
        pub a_resp_valid: Signal<Out, Bit>,
        pub a_resp_ready: Signal<In, Bit>,
        // source 1
        pub b_req_valid: Signal<In, Bit>,
        pub b_req_ready: Signal<Out, Bit>,
        pub b_req_addr: Signal<In, Bits<64>>,
        pub b_req_len: Signal<In, Bits<13>>,
        pub b_req_tag: Signal<In, Bits<8>>,
        pub b_resp_valid: Signal<Out, Bit>,
        pub b_resp_ready: Signal<In, Bit>,
        /// Response beat, shared by both sources (each sees its own `*_resp_valid`).
        pub resp_data: Signal<Out, Bits<512>>,
        pub resp_tag: Signal<Out, Bits<8>>,
        pub resp_last: Signal<Out, Bit>,
        // the port
        pub rd_req_valid: Signal<Out, Bit>,
        pub rd_req_ready: Signal<In, Bit>,
        pub rd_req_addr: Signal<Out, Bits<64>>,
        pub rd_req_len: Signal<Out, Bits<13>>,
        pub rd_req_tag: Signal<Out, Bits<8>>,
        pub rd_resp_valid: Signal<In, Bit>,
        pub rd_resp_ready: Signal<Out, Bit>,
        pub rd_resp_data: Signal<In, Bits<512>>,
        pub rd_resp_tag: Signal<In, Bits<8>>,
        pub rd_resp_last: Signal<In, Bit>,

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
        self.grant_b.next = self.b_req_valid.val() & (!self.a_req_valid.val() | !self.last_b.q.val());
        self.rd_req_valid.next = (self.a_req_valid.val() | self.b_req_valid.val()) & !self.order.full.val();
        self.rd_req_addr.next = self.a_req_addr.val();
        self.rd_req_len.next = self.a_req_len.val();
        self.rd_req_tag.next = self.a_req_tag.val();
        if self.grant_b.val() {
            self.rd_req_addr.next = self.b_req_addr.val();
            self.rd_req_len.next = self.b_req_len.val();
            self.rd_req_tag.next = self.b_req_tag.val();
        }
        self.a_req_ready.next = self.rd_req_ready.val() & !self.order.full.val() & !self.grant_b.val();
        self.b_req_ready.next = self.rd_req_ready.val() & !self.order.full.val() & self.grant_b.val();
        self.order.din.next = self.grant_b.val();
        self.order.push.next = self.rd_req_valid.val() & self.rd_req_ready.val();
        if self.rd_req_valid.val() & self.rd_req_ready.val() {
            self.last_b.d.next = self.grant_b.val();
        }
        // responses to the source at the head of the order FIFO
        self.resp_data.next = self.rd_resp_data.val();
        self.resp_tag.next = self.rd_resp_tag.val();
        self.resp_last.next = self.rd_resp_last.val();
        self.a_resp_valid.next = self.rd_resp_valid.val() & !self.order.empty.val() & !self.order.dout.val();
        self.b_resp_valid.next = self.rd_resp_valid.val() & !self.order.empty.val() & self.order.dout.val();
        self.rd_resp_ready.next = !self.order.empty.val()
            & ((!self.order.dout.val() & self.a_resp_ready.val()) | (self.order.dout.val() & self.b_resp_ready.val()));
        self.order.pop.next = self.rd_resp_valid.val() & self.rd_resp_ready.val() & self.rd_resp_last.val();
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
            u.a_req_valid.next = av;
            u.a_req_addr.next = bits(next_addr[0]);
            u.a_req_len.next = bits(beats[0] * 64);
            u.a_req_tag.next = bits(0xA0);
            u.b_req_valid.next = bv;
            u.b_req_addr.next = bits(next_addr[1]);
            u.b_req_len.next = bits(beats[1] * 64);
            u.b_req_tag.next = bits(0xB0);
            u.rd_req_ready.next = rng.gen_bool(0.7);
            u.a_resp_ready.next = rng.gen_bool(0.6);
            u.b_resp_ready.next = rng.gen_bool(0.6);
            if cur.is_none() {
                cur = port.pop_front();
                cur_beat = 0;
            }
            u.rd_resp_valid.next = cur.is_some() && cycle % 3 != 0;
            if let Some((a, n, t)) = cur {
                u.rd_resp_data.next = bits::<512>(a + cur_beat);
                u.rd_resp_tag.next = bits(t as u64);
                u.rd_resp_last.next = cur_beat + 1 == n;
            }
            simulate(&mut u, 100);
            assert!(!(u.a_req_ready.val() && u.b_req_ready.val()));
            if u.rd_req_valid.val() && u.rd_req_ready.val() {
                let src = if u.b_req_ready.val() { 1 } else { 0 };
                assert!(if src == 1 { bv } else { av });
                let (a, n) = (u.rd_req_addr.val().to_u64(), u.rd_req_len.val().to_u64() / 64);
                assert_eq!(a, next_addr[src]);
                port.push_back((a, n, u.rd_req_tag.val().to_u64() as u8));
                expect[src].push_back((a, n));
                next_addr[src] += 0x1000;
                granted[src] += 1;
                gap[src] = 0;
            }
            for s in 0..2 {
                let wants = if s == 0 { av } else { bv };
                if wants && !(u.rd_req_valid.val() && u.rd_req_ready.val() && (u.b_req_ready.val() == (s == 1))) {
                    gap[s] += (u.rd_req_valid.val() && u.rd_req_ready.val()) as usize;
                    max_gap[s] = max_gap[s].max(gap[s]);
                }
            }
            if u.rd_resp_ready.val() && u.rd_resp_valid.val() {
                let (a, n, t) = cur.unwrap();
                let src = if u.b_resp_valid.val() { 1 } else { 0 };
                assert!(u.a_resp_valid.val() ^ u.b_resp_valid.val());
                assert_eq!(t, if src == 0 { 0xA0 } else { 0xB0 });
                assert_eq!(u.resp_data.val().get_bits::<64>(0).to_u64(), a + cur_beat);
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
