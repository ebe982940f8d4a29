//! DMA write arbiter: the Scatter Path and CQE Generation share the RNIC's one DMA write port.
//!
//! Whole commands only: the arbiter grants a source when no command is in progress (round robin when both
//! have one) and stays with it until that source's `last` beat is taken, so a completion can never be written
//! in the middle of a payload (and so, with writes performed in order, a CQE lands after the payload of the
//! packet that completed it: RX Parse hands on one packet's payload at a time, so a Scatter Path's last beat
//! is out before a later packet's beats can hold the other input; `sim::system::CqeOrder` checks it on every
//! DMA write in `rnic_system`). Chained, three sources share the port (the top: the Responder's and the
//! Completer's Scatter Paths, then CQE Generation, whose beats are single-beat commands: `last` always high).
//!
//! The grant is a register: `a.ready` / `b.ready` are the port's ready AND a flip-flop, never a function of
//! the sources' `valid`s in the same cycle. A source's next state therefore never waits on another source's
//! request through the arbiter (before, the top's worst path, 12 LUT levels, ran from one arbiter's grant
//! through the other's `valid`-dependent grant and the ready chain back into the Completer). The price is
//! one idle cycle between commands (the cycle the new grant is registered); a command is a packet's payload
//! (up to 64 beats) or one CQE beat, and the port (512 bits at the core clock) has 1.6x the line rate.

use crate::common::ports::{DmaWrite, DmaWriteTarget};
use rust_hdl::prelude::*;

#[derive(LogicBlock, Default)]
pub struct DmaWriteArb {
    pub clock: Signal<In, Clock>,
    /// Source a: multi-beat commands.
    pub a: DmaWriteTarget,
    /// Source b.
    pub b: DmaWriteTarget,
    /// The port.
    pub port: DmaWrite,
    /// The granted source (at most one).
    gnt_a: DFF<Bit>,
    gnt_b: DFF<Bit>,
    /// The granted source's command has started (its first beat was taken, its last not yet).
    mid: DFF<Bit>,
    /// The last command granted was b's (round robin).
    last_b: DFF<Bit>,
    take: Signal<Local, Bit>,
}

impl Logic for DmaWriteArb {
    #[hdl_gen]
    fn update(&mut self) {
        dff_setup!(self, clock, gnt_a, gnt_b, mid, last_b);
        self.port.valid.next = self.gnt_a.q.val() & self.a.valid.val();
        self.port.addr.next = self.a.addr.val();
        self.port.data.next = self.a.data.val();
        self.port.strb.next = self.a.strb.val();
        self.port.last.next = self.a.last.val();
        if self.gnt_b.q.val() {
            self.port.valid.next = self.b.valid.val();
            self.port.addr.next = self.b.addr.val();
            self.port.data.next = self.b.data.val();
            self.port.strb.next = self.b.strb.val();
            self.port.last.next = self.b.last.val();
        }
        self.a.ready.next = self.port.ready.val() & self.gnt_a.q.val();
        self.b.ready.next = self.port.ready.val() & self.gnt_b.q.val();
        self.take.next = self.port.valid.val() & self.port.ready.val();
        if self.gnt_a.q.val() | self.gnt_b.q.val() {
            if self.take.val() {
                self.mid.d.next = !self.port.last.val();
                if self.port.last.val() {
                    // the command is done: the next grant is decided in the next cycle
                    self.gnt_a.d.next = false;
                    self.gnt_b.d.next = false;
                }
            } else if !self.mid.q.val() & !self.port.valid.val() {
                // granted, but the source has withdrawn before its first beat: free the port
                self.gnt_a.d.next = false;
                self.gnt_b.d.next = false;
            }
        } else {
            // no grant: b if only b waits, or both wait and a went last
            self.mid.d.next = false;
            if self.b.valid.val() & (!self.a.valid.val() | !self.last_b.q.val()) {
                self.gnt_b.d.next = true;
                self.last_b.d.next = true;
            } else if self.a.valid.val() {
                self.gnt_a.d.next = true;
                self.last_b.d.next = false;
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
    fn a_cqe_never_lands_inside_a_payload_and_neither_source_starves() {
        let mut u = DmaWriteArb::default();
        u.connect_all();
        let mut rng = SmallRng::seed_from_u64(5);
        let (mut a_cmd, mut a_beat, mut a_len) = (0u64, 0u64, rng.gen_range(1..6u64));
        let mut b_n = 0u64;
        let mut in_a: Option<u64> = None;
        let (mut a_done, mut b_done) = (0u64, 0u64);
        // sources as AXI stream masters: a valid beat stays valid until it is taken
        let (mut a_held, mut b_held) = (false, false);
        for _ in 0..20_000 {
            let av = a_held || rng.gen_bool(0.7);
            let bv = b_held || rng.gen_bool(0.3);
            u.a.valid.next = av;
            u.a.addr.next = bits(a_cmd << 16 | a_beat);
            u.a.last.next = a_beat + 1 == a_len;
            u.a.strb.next = bits(u64::MAX);
            u.b.valid.next = bv;
            u.b.addr.next = bits(1 << 63 | b_n);
            u.b.strb.next = bits(0xFFFF_FFFF);
            u.b.last.next = true;
            u.port.ready.next = rng.gen_bool(0.8);
            simulate(&mut u, 100);
            assert!(!(u.a.ready.val() && u.b.ready.val()));
            a_held = av && !u.a.ready.val();
            b_held = bv && !u.b.ready.val();
            if u.port.valid.val() && u.port.ready.val() {
                let a = u.port.addr.val().to_u64();
                if a >> 63 == 1 {
                    assert!(in_a.is_none(), "a CQE beat inside a payload command");
                    assert_eq!(a & 0xFFFF, b_n, "CQE beats in order");
                    assert!(u.port.last.val());
                    assert!(u.b.ready.val() && bv);
                    b_n += 1;
                    b_done += 1;
                } else {
                    assert!(u.a.ready.val() && av);
                    assert_eq!((a >> 16, a & 0xFFFF), (a_cmd, a_beat), "payload beats in order");
                    in_a = Some(a_cmd);
                    a_beat += 1;
                    if u.port.last.val() {
                        assert_eq!(a_beat, a_len);
                        in_a = None;
                        a_cmd += 1;
                        a_beat = 0;
                        a_len = rng.gen_range(1..6);
                        a_done += 1;
                    }
                }
            }
            u.clock.next = false.into();
            simulate(&mut u, 100);
            u.clock.next = true.into();
            simulate(&mut u, 100);
        }
        assert!(a_done > 1000 && b_done > 1000, "{a_done} payload commands, {b_done} CQEs");
    }

    #[test]
    fn the_readies_are_the_port_ready_and_a_registered_grant() {
        // the readies must not follow the sources' valids within a cycle (the top's depth depends on it)
        let mut u = DmaWriteArb::default();
        u.connect_all();
        let mut rng = SmallRng::seed_from_u64(9);
        let clock = |u: &mut DmaWriteArb| {
            u.clock.next = false.into();
            simulate(u, 100);
            u.clock.next = true.into();
            simulate(u, 100);
        };
        let mut beats = 0;
        for _ in 0..5_000 {
            let (av, bv, al, bl) = (rng.gen_bool(0.6), rng.gen_bool(0.6), rng.gen_bool(0.3), rng.gen_bool(0.5));
            let rdy = rng.gen_bool(0.8);
            let mut seen = None;
            for (xa, xb) in [(false, false), (true, false), (false, true), (true, true), (av, bv)] {
                u.a.valid.next = xa;
                u.b.valid.next = xb;
                u.a.last.next = al;
                u.b.last.next = bl;
                u.port.ready.next = rdy;
                simulate(&mut u, 100);
                let r = (u.a.ready.val(), u.b.ready.val());
                assert_eq!(*seen.get_or_insert(r), r, "a ready followed the valids in the same cycle");
                assert!(rdy || r == (false, false));
            }
            beats += usize::from(u.port.valid.val() && rdy);
            clock(&mut u);
        }
        assert!(beats > 1_000, "only {beats} beats in 5,000 cycles");
    }
}
