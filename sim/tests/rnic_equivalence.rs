//! The whole RNIC on both simulators at once: the same system scenario (driver, host memory, 100G link, the
//! golden model as peer) drives the Verilator model of the emitted Verilog and the rust-hdl model in lockstep;
//! every RNIC output is compared on every cycle (`sim::system::Lockstep`). A short scenario: rust-hdl's
//! simulator runs the whole top at a few hundred cycles per second. The port is on an 802.1Q VLAN (VID 100,
//! as the peer): VLAN Strip removes the tag from every frame in, TX Packet Build tags every frame out (the
//! untagged paths are the rest of the system tests', on Verilator alone).

use std::time::Instant;

use sim::system::{rig_vlan_with, Lockstep};
use testbench::model::*;

#[test]
fn both_simulators_agree_cycle_for_cycle_on_a_write_and_a_read() {
    let dir = std::env::temp_dir().join(format!("rnic-equivalence-{}", std::process::id()));
    let t = Instant::now();
    let mut r = rig_vlan_with(Lockstep::default(), 256, &dir, 100);
    let setup = r.sys.borrow().cycle;
    let mut w = SendWr::new(1, WrOpcode::RdmaWrite, vec![Sge { addr: r.src + 5, length: 300, lkey: r.lkey }]);
    w.remote_addr = r.peer_buf + 7;
    w.rkey = r.peer_rkey;
    r.drv.post_send(r.qpn, &w).unwrap();
    // a READ of 700 bytes: FIRST, MIDDLE, LAST at MTU 256 (the MIDDLE and the LAST take the Completer's fast path)
    let mut rd = SendWr::new(2, WrOpcode::RdmaRead, vec![Sge { addr: r.src + 4096, length: 700, lkey: r.lkey }]);
    rd.remote_addr = r.peer_buf + 7;
    rd.rkey = r.peer_rkey;
    r.drv.post_send(r.qpn, &rd).unwrap();
    // and the peer writes 200 bytes to us: the Responder's path in lockstep too
    {
        let mut s = r.sys.borrow_mut();
        let mut pw = SendWr::new(9, WrOpcode::RdmaWrite, vec![Sge { addr: r.peer_buf + 0x1000, length: 200, lkey: r.peer_rkey }]);
        pw.remote_addr = r.src + 0x2000;
        pw.rkey = r.lkey;
        let q = r.peer_qpn;
        s.peer.post_send(q, pw).unwrap();
    }
    let mut wcs = Vec::new();
    for _ in 0..40 {
        wcs.extend(r.drv.poll_cq(Cq(0), 4).unwrap());
        if wcs.len() == 2 && r.sys.borrow().sent.len() >= 4 {
            break;
        }
        let mut s = r.sys.borrow_mut();
        for _ in 0..100 {
            s.step();
        }
    }
    let s = r.sys.borrow();
    let cycles = s.cycle;
    eprintln!(
        "{cycles} cycles in lockstep ({setup} of set-up) in {:.1} s: {:.0} cycles/s; {} frames out, {} in",
        t.elapsed().as_secs_f64(),
        cycles as f64 / t.elapsed().as_secs_f64(),
        s.sent.len(),
        s.received.len()
    );
    assert_eq!(wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), vec![(1, WcStatus::Success), (2, WcStatus::Success)]);
    assert!(s.peer.mem().read(r.peer_buf + 7, 300).unwrap() == r.src_bytes(5, 300), "the write landed");
    let back = r.mem.lock().unwrap().read(r.src + 4096, 700).unwrap();
    assert!(back[..300] == r.src_bytes(5, 300), "the read brought the written bytes back");
    assert!(back == s.peer.mem().read(r.peer_buf + 7, 700).unwrap(), "and the peer's bytes after them");
    assert!(s.sent.len() >= 3 && s.received.len() >= 2);
    let pw = s.peer.mem().read(r.peer_buf + 0x1000, 200).unwrap();
    assert!(r.src_bytes(0x2000, 200) == pw, "the peer's write reached our memory through the Responder");
    assert!(s.sent.iter().chain(&s.received).all(|f| f[12..16] == [0x81, 0x00, 0x00, 100]), "every frame on VLAN 100");
}
