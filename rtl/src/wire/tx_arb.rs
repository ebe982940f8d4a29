//! TX request arbiter: the Requester and the Responder share one TX Packet Build and one Gather Path.
//!
//! Each source issues a packet as a header plus, when the header has payload, one gather command. TX Packet
//! Build takes payload in header order and the Gather Path returns it in command order, so the arbiter keeps
//! each pair together: it grants a header (round robin at packet boundaries), and when that header has payload
//! it stays with the same source until the source's gather command has passed.

use rust_hdl::prelude::*;

use crate::common::ports::{TxPacket, TxPacketSink};
#[cfg(test)]
use crate::wire::tx_build::TxHeader;

crate::logic_block! {
    pub struct TxReqArb {
        pub clock: Signal<In, Clock>,
        /// The Requester's packets (a) and the Responder's (b).
        pub a: TxPacketSink,
        pub b: TxPacketSink,
        /// The packet granted: its header to TX Packet Build, its gather command to the Gather Path.
        pub out: TxPacket,
        /// Waiting for the gather command of the header granted last (from b when `sel_b`).
        locked: DFF<Bit>,
        sel_b: DFF<Bit>,
        last_b: DFF<Bit>,
        pick_b: Signal<Local, Bit>,
        has_pay: Signal<Local, Bit>,
        zero13: Constant<Bits<13>> = crate::common::consts::k(0),
    }
}

impl Logic for TxReqArb {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, locked, sel_b, last_b);
        self.pick_b.next = self.b.hdr_valid.val() & (!self.a.hdr_valid.val() | !self.last_b.q.val());
        // headers: only at a packet boundary
        self.out.hdr.next = self.a.hdr.val();
        self.out.hdr_valid.next = self.a.hdr_valid.val() & !self.locked.q.val();
        if self.pick_b.val() {
            self.out.hdr.next = self.b.hdr.val();
            self.out.hdr_valid.next = self.b.hdr_valid.val() & !self.locked.q.val();
        }
        self.a.hdr_ready.next = self.out.hdr_ready.val() & !self.locked.q.val() & !self.pick_b.val();
        self.b.hdr_ready.next = self.out.hdr_ready.val() & !self.locked.q.val() & self.pick_b.val();
        self.has_pay.next = self.out.hdr.val().pay_len != self.zero13.val();
        if self.out.hdr_valid.val() & self.out.hdr_ready.val() {
            self.last_b.d.next = self.pick_b.val();
            self.sel_b.d.next = self.pick_b.val();
            self.locked.d.next = self.has_pay.val();
        }
        // gather commands: only the locked source's
        self.out.g_addr.next = self.a.g_addr.val();
        self.out.g_len.next = self.a.g_len.val();
        self.out.g_inl.next = self.a.g_inl.val();
        self.out.g_valid.next = self.a.g_valid.val() & self.locked.q.val() & !self.sel_b.q.val();
        if self.sel_b.q.val() {
            self.out.g_addr.next = self.b.g_addr.val();
            self.out.g_len.next = self.b.g_len.val();
            self.out.g_inl.next = self.b.g_inl.val();
            self.out.g_valid.next = self.b.g_valid.val() & self.locked.q.val();
        }
        self.a.g_ready.next = self.out.g_ready.val() & self.locked.q.val() & !self.sel_b.q.val();
        self.b.g_ready.next = self.out.g_ready.val() & self.locked.q.val() & self.sel_b.q.val();
        if self.out.g_valid.val() & self.out.g_ready.val() {
            self.locked.d.next = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::VecDeque;

    /// Two sources of (header, optional gather) pairs; the merged streams must pair up in order.
    #[test]
    fn headers_and_their_gather_commands_stay_paired_in_order() {
        let mut u = TxReqArb::default();
        u.connect_all();
        let mut rng = SmallRng::seed_from_u64(11);
        // per source: queue of packets (id, pay_len); a header and its command are offered independently
        let mut pk: [VecDeque<(u64, u64)>; 2] = [VecDeque::new(), VecDeque::new()];
        let mut gq: [VecDeque<(u64, u64)>; 2] = [VecDeque::new(), VecDeque::new()];
        let mut next = [0u64, 1 << 32];
        let mut hdrs: VecDeque<(u64, u64)> = VecDeque::new();
        let mut cmds = 0u64;
        let mut count = [0u64; 2];
        for _ in 0..20_000 {
            for s in 0..2 {
                if pk[s].len() < 2 && rng.gen_bool(0.5) {
                    let len = if rng.gen_bool(0.3) { 0 } else { rng.gen_range(1..4096) };
                    pk[s].push_back((next[s], len));
                    if len > 0 {
                        gq[s].push_back((next[s], len));
                    }
                    next[s] += 1;
                }
            }
            let mk = |p: Option<&(u64, u64)>| {
                let mut h = TxHeader::default();
                if let Some(&(id, len)) = p {
                    h.psn = bits(id & 0xFF_FFFF);
                    h.dest_qpn = bits(id >> 32);
                    h.pay_len = bits(len);
                }
                h
            };
            u.a.hdr.next = mk(pk[0].front());
            u.a.hdr_valid.next = !pk[0].is_empty();
            u.b.hdr.next = mk(pk[1].front());
            u.b.hdr_valid.next = !pk[1].is_empty();
            let ga = gq[0].front().copied();
            let gb = gq[1].front().copied();
            u.a.g_valid.next = ga.is_some();
            u.a.g_addr.next = bits(ga.map_or(0, |g| g.0));
            u.a.g_len.next = bits(ga.map_or(0, |g| g.1));
            u.b.g_valid.next = gb.is_some();
            u.b.g_addr.next = bits(gb.map_or(0, |g| g.0));
            u.b.g_len.next = bits(gb.map_or(0, |g| g.1));
            u.out.hdr_ready.next = rng.gen_bool(0.7);
            u.out.g_ready.next = rng.gen_bool(0.7);
            simulate(&mut u, 100);
            if u.out.hdr_valid.val() && u.out.hdr_ready.val() {
                let h = u.out.hdr.val();
                let id = h.dest_qpn.to_u64() << 32 | h.psn.to_u64();
                let s = (id >> 32) as usize;
                assert!(if s == 0 { u.a.hdr_ready.val() } else { u.b.hdr_ready.val() });
                let p = pk[s].pop_front().unwrap();
                assert_eq!(p.0, id);
                if p.1 > 0 {
                    hdrs.push_back(p);
                }
                count[s] += 1;
            }
            if u.out.g_valid.val() && u.out.g_ready.val() {
                let (a, l) = (u.out.g_addr.val().to_u64(), u.out.g_len.val().to_u64());
                let s = (a >> 32) as usize;
                assert_eq!(gq[s].pop_front(), Some((a, l)));
                assert_eq!(hdrs.pop_front(), Some((a, l)), "gather commands in header order");
                cmds += 1;
            }
            u.clock.next = false.into();
            simulate(&mut u, 100);
            u.clock.next = true.into();
            simulate(&mut u, 100);
        }
        assert!(count[0] > 1500 && count[1] > 1500 && cmds > 2000, "{count:?} {cmds}");
    }
}
