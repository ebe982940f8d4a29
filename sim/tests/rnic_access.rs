//! Remote access errors at our Responder (Verilator RNIC, golden model as the requester): a wrong rkey, an
//! address past the end of the MR, and a missing REMOTE_WRITE / REMOTE_READ / REMOTE_ATOMIC right (WRITE, READ
//! and FETCH_ADD) are each answered with NAK
//! remote access error (the requester completes with REM_ACCESS_ERR), our QP goes to the error state (a valid
//! request that follows on it is dropped and counted), and not one byte of our host memory changes: the test
//! keeps a shadow copy of the whole host memory from before the bad request and compares every byte after.

use sim::system::rig;
use testbench::model::*;

/// How the bad request goes wrong.
#[derive(Clone, Copy, Debug)]
enum Bad {
    WrongRkey,
    PastTheEnd,
    NoRemoteWrite,
    NoRemoteRead,
    /// FETCH_ADD to an MR without REMOTE_ATOMIC, past the end of the MR, with a wrong rkey
    AtomicNoRemoteAtomic,
    AtomicPastTheEnd,
    AtomicWrongRkey,
}

fn one(bad: Bad) {
    let dir = std::env::temp_dir().join(format!("rnic-access-{bad:?}-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    // two more MRs of ours inside the registered buffer, each lacking one remote right
    let ro = r.drv.reg_mr(Pd(1), r.src + (1 << 20), 1 << 16, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ).unwrap();
    let wo = r.drv.reg_mr(Pd(1), r.src + (1 << 20) + (1 << 16), 1 << 16, AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE).unwrap();
    let (verb, addr, rkey, len) = match bad {
        Bad::WrongRkey => (WrOpcode::RdmaWrite, r.src + 4096, r.lkey ^ 0x100, 512),
        Bad::PastTheEnd => (WrOpcode::RdmaWrite, r.src + (1 << 21) - 100, r.lkey, 512),
        Bad::NoRemoteWrite => (WrOpcode::RdmaWrite, r.src + (1 << 20) + 64, ro, 512),
        Bad::NoRemoteRead => (WrOpcode::RdmaRead, r.src + (1 << 20) + (1 << 16) + 64, wo, 512),
        Bad::AtomicNoRemoteAtomic => (WrOpcode::AtomicFetchAndAdd, r.src + (1 << 20) + (1 << 16) + 64, wo, 8),
        Bad::AtomicPastTheEnd => (WrOpcode::AtomicFetchAndAdd, r.src + (1 << 21), r.lkey, 8),
        Bad::AtomicWrongRkey => (WrOpcode::AtomicFetchAndAdd, r.src + 4096, r.lkey ^ 0x100, 8),
    };
    let shadow = r.mem.lock().unwrap().clone();
    let requests_before = r.counter("resp_requests");
    // the peer's bad request (its local buffer: the start of its MR), then a good WRITE behind it
    {
        let mut s = r.sys.borrow_mut();
        let qpn = r.peer_qpn;
        let mut w = SendWr::new(1, verb, vec![Sge { addr: r.peer_buf, length: len, lkey: r.peer_rkey }]);
        w.remote_addr = addr;
        w.rkey = rkey;
        s.peer.post_send(qpn, w).unwrap();
        let mut good = SendWr::new(2, WrOpcode::RdmaWrite, vec![Sge { addr: r.peer_buf, length: 256, lkey: r.peer_rkey }]);
        good.remote_addr = r.src + 8192;
        good.rkey = r.lkey;
        s.peer.post_send(qpn, good).unwrap();
    }
    let wcs = r.wait_peer_completions(2, 400_000);
    assert_eq!(wcs.len(), 2, "{bad:?}: {wcs:?}");
    assert_eq!((wcs[0].wr_id, wcs[0].status), (1, WcStatus::RemAccessErr), "{bad:?}: the requester sees NAK remote access error");
    // the requester's QP is in error too: its later WRITE is flushed, never sent
    assert_eq!((wcs[1].wr_id, wcs[1].status), (2, WcStatus::WrFlushErr), "{bad:?}");
    assert_eq!(r.counter("resp_class_c_naks"), 1, "{bad:?}: one class-C NAK");
    // the peer's NAK counter agrees: syndrome 0x62 (remote access error)
    assert_eq!(r.sys.borrow().peer.counters().naks_received.get(&0x62).copied(), Some(1), "{bad:?}");

    // our QP is in error: a valid WRITE at the expected PSN, from a fresh peer QP aimed at ours, is dropped
    let (fresh, drops_before) = {
        let d = r.counter("resp_drop_qp_error");
        let mut peer = std::mem::replace(&mut r.sys.borrow_mut().peer, Device::new(DeviceConfig::simple(9)));
        let cq = r.peer_cq;
        let cap = QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let q = peer.create_qp(Pd(1), QpInitAttr { qp_type: QpType::Rc, send_cq: cq, recv_cq: cq, cap, sq_sig_all: false }).unwrap();
        let av = AddressVector::new(testbench::wire::frame::MacAddr(sim::system::OUR_MAC), std::net::IpAddr::V4(sim::system::OUR_IP.into()));
        for attr in [
            QpAttr { qp_state: Some(QpState::Init), qp_access_flags: Some(AccessFlags::ALL), ..Default::default() },
            QpAttr { qp_state: Some(QpState::Rtr), path_mtu: Some(1024), dest_qp_num: Some(r.qpn), rq_psn: Some(0), av: Some(av), ..Default::default() },
            // our ePSN did not move past the NAKed request (0x1234 was the peer's first PSN)
            QpAttr { qp_state: Some(QpState::Rts), sq_psn: Some(0x1234), timeout: Some(31), retry_cnt: Some(0), ..Default::default() },
        ] {
            peer.modify_qp(q, &attr).unwrap();
        }
        let mut w = SendWr::new(3, WrOpcode::RdmaWrite, vec![Sge { addr: r.peer_buf, length: 256, lkey: r.peer_rkey }]);
        w.remote_addr = r.src + 8192;
        w.rkey = r.lkey;
        peer.post_send(q, w).unwrap();
        r.sys.borrow_mut().peer = peer;
        (q, d)
    };
    r.sys.borrow_mut().run_until(20_000, |_| false);
    assert_eq!(r.counter("resp_drop_qp_error"), drops_before + 1, "{bad:?}: the request on our QP in error was dropped (fresh peer QP {fresh:#x})");
    assert!(r.counter("resp_requests") > requests_before, "{bad:?}: our Responder saw the requests");

    // not one byte changed, anywhere in our host memory (buffers, rings, everything allocated)
    let now = r.mem.lock().unwrap().clone();
    let (a, b) = (shadow.regions(), now.regions());
    assert_eq!(a.len(), b.len(), "{bad:?}: allocations");
    for ((base, x), (_, y)) in a.iter().zip(&b) {
        if x != y {
            let at = x.iter().zip(y.iter()).position(|(p, q)| p != q).unwrap();
            panic!("{bad:?}: host memory changed at {:#x}", base + at as u64);
        }
    }
    assert!(r.sys.borrow().dma.faults.is_empty(), "{:?}", r.sys.borrow().dma.faults);
    assert_eq!(r.sys.borrow().out.underruns, 0, "the MAC's TX stream paused inside a frame");
}

#[test]
fn wrong_rkey_is_naked_and_writes_nothing() {
    one(Bad::WrongRkey);
}

#[test]
fn write_past_the_end_of_the_mr_is_naked_and_writes_nothing() {
    one(Bad::PastTheEnd);
}

#[test]
fn write_without_remote_write_is_naked_and_writes_nothing() {
    one(Bad::NoRemoteWrite);
}

#[test]
fn read_without_remote_read_is_naked_and_writes_nothing() {
    one(Bad::NoRemoteRead);
}

#[test]
fn atomic_without_remote_atomic_is_naked_and_writes_nothing() {
    one(Bad::AtomicNoRemoteAtomic);
}

#[test]
fn atomic_past_the_end_of_the_mr_is_naked_and_writes_nothing() {
    one(Bad::AtomicPastTheEnd);
}

#[test]
fn atomic_with_a_wrong_rkey_is_naked_and_writes_nothing() {
    one(Bad::AtomicWrongRkey);
}

/// SEND_WITH_INV from the peer naming our fast-registration MR (`Driver::reg_mr_fast`): our receive completes
/// with WITH_INV and the R_Key, and the MR is invalid in both Key Cache copies: our own SEND from it (another QP)
/// completes LOC_PROT_ERR in WQE Check, and the peer's WRITE through it is NAKed remote access error with not
/// one byte of our host memory changed. A SEND_WITH_INV naming our ordinary MR (`reg_mr`) invalidates nothing
/// (rxe `rxe_invalidate_mr` takes only `IB_MR_TYPE_MEM_REG`): class J as rxe 6.1 does it, the SEND ACKed
/// (the peer completes it with success), our receive completes REM_INV_REQ_ERR, and the MR still serves.
#[test]
fn send_with_invalidate_invalidates_our_fast_mr_in_both_key_cache_copies() {
    let dir = std::env::temp_dir().join(format!("rnic-access-send-inv-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    let f = r.drv.reg_mr_fast(Pd(1), r.src + (1 << 20), 1 << 16, AccessFlags::ALL).unwrap();
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let (q2, _) = r.add_qp_pair_with(1024, 0x100, 0x200, cap, Cq(0));
    let (q3, p3) = r.add_qp_pair_with(1024, 0x300, 0x400, cap, Cq(0));
    let (_, p4) = r.add_qp_pair_with(1024, 0x500, 0x600, cap, Cq(0));
    let peer_send_inv = |r: &mut sim::system::Rig, qpn: u32, id: u64, key: u32| {
        let mut w = SendWr::new(id, WrOpcode::SendWithInv, vec![Sge { addr: r.peer_buf, length: 300, lkey: r.peer_rkey }]);
        w.invalidate_rkey = key;
        w.flags.signaled = true;
        r.sys.borrow_mut().peer.post_send(qpn, w).unwrap();
    };
    r.drv.post_recv(r.qpn, &RecvWr { wr_id: 7, sg_list: vec![Sge { addr: r.src + 0x8000, length: 1000, lkey: r.lkey }] }).unwrap();
    let pq = r.peer_qpn;
    peer_send_inv(&mut r, pq, 1, f);
    let pw = r.wait_peer_completions(1, 200_000);
    assert_eq!((pw.len(), pw[0].status), (1, WcStatus::Success), "{pw:?}");
    let ours = r.our_completions(1, 100_000);
    assert_eq!(ours.len(), 1, "{ours:?}");
    let w = &ours[0];
    assert_eq!((w.wr_id, w.status, w.opcode, w.byte_len), (7, WcStatus::Success, WcOpcode::Recv, 300), "{w:?}");
    assert!(w.wc_flags.has(WcFlags::WITH_INV) && !w.wc_flags.has(WcFlags::WITH_IMM), "{w:?}");
    assert_eq!(w.invalidated_rkey, f, "{w:?}");

    // WQE Check's copy: our SEND gathering from the invalidated MR
    let s = SendWr::new(8, WrOpcode::Send, vec![Sge { addr: r.src + (1 << 20), length: 64, lkey: f }]);
    r.drv.post_send(q2, &s).unwrap();
    let ours = r.our_completions(1, 100_000);
    assert_eq!(ours.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), vec![(8, WcStatus::LocProtErr)]);

    // the Responder's copy: the peer's WRITE through the invalidated key, nothing written
    let shadow = r.mem.lock().unwrap().clone();
    {
        let mut w = SendWr::new(2, WrOpcode::RdmaWrite, vec![Sge { addr: r.peer_buf, length: 512, lkey: r.peer_rkey }]);
        w.remote_addr = r.src + (1 << 20) + 4096;
        w.rkey = f;
        r.sys.borrow_mut().peer.post_send(pq, w).unwrap();
    }
    let pw = r.wait_peer_completions(1, 200_000);
    assert_eq!(pw.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), vec![(2, WcStatus::RemAccessErr)]);
    assert!(r.mem.lock().unwrap().read(r.src, 1 << 21).unwrap() == shadow.read(r.src, 1 << 21).unwrap(), "nothing written");

    // our ordinary MR cannot be invalidated: class J on q3, the SEND ACKed, REM_INV_REQ_ERR; the MR still serves
    let acks = r.counter("resp_acks");
    r.drv.post_recv(q3, &RecvWr { wr_id: 9, sg_list: vec![Sge { addr: r.src + 0x9000, length: 1000, lkey: r.lkey }] }).unwrap();
    let lkey = r.lkey;
    peer_send_inv(&mut r, p3, 3, lkey);
    let ours = r.our_completions(1, 200_000);
    assert_eq!(ours.iter().map(|w| (w.wr_id, w.status, w.byte_len, w.wc_flags.0)).collect::<Vec<_>>(), vec![(9, WcStatus::RemInvReqErr, 0, 0)]);
    assert_eq!(r.counter("resp_acks"), acks + 1, "class J: the SEND is ACKed");
    let pw = r.wait_peer_completions(1, 200_000);
    assert_eq!(pw.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), vec![(3, WcStatus::Success)], "the peer's SEND_WITH_INV");
    {
        let mut w = SendWr::new(4, WrOpcode::RdmaWrite, vec![Sge { addr: r.peer_buf, length: 512, lkey: r.peer_rkey }]);
        w.remote_addr = r.src + 0x10_0000 - 512;
        w.rkey = r.lkey;
        w.flags.signaled = true;
        r.sys.borrow_mut().peer.post_send(p4, w).unwrap();
    }
    let pw = r.wait_peer_completions(1, 200_000);
    assert_eq!(pw.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), vec![(4, WcStatus::Success)], "the MR still serves");
    let theirs = r.sys.borrow().peer.mem().read(r.peer_buf, 512).unwrap();
    assert_eq!(r.mem.lock().unwrap().read(r.src + 0x10_0000 - 512, 512).unwrap(), theirs);
}

/// LOCAL_INV of our fast-registration MR: nothing goes on the wire, it completes in order after the WRITE
/// before it with WC opcode LOCAL_INV, and the MR is then invalid in both Key Cache copies: the peer's WRITE
/// through it is NAKed remote access error with not one byte of our host memory changed, and our own SEND
/// gathering from it completes LOC_PROT_ERR. LOCAL_INV of our ordinary MR completes LOC_QP_OP_ERR (rxe
/// `rxe_invalidate_mr` takes only `IB_MR_TYPE_MEM_REG`), the WQE behind it is flushed, and the MR still serves.
#[test]
fn local_invalidate_of_our_fast_mr_completes_in_order_and_the_key_is_refused_after() {
    let dir = std::env::temp_dir().join(format!("rnic-access-local-inv-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    let f = r.drv.reg_mr_fast(Pd(1), r.src + (1 << 20), 1 << 16, AccessFlags::ALL).unwrap();
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let (q2, _) = r.add_qp_pair_with(1024, 0x100, 0x200, cap, Cq(0));
    let (q3, _) = r.add_qp_pair_with(1024, 0x300, 0x400, cap, Cq(0));
    let (q4, _) = r.add_qp_pair_with(1024, 0x500, 0x600, cap, Cq(0));
    let rx_before = r.sys.borrow().peer.counters().rx_frames;
    let mut w = SendWr::new(1, WrOpcode::RdmaWrite, vec![Sge { addr: r.src + 0x4000, length: 3000, lkey: r.lkey }]);
    w.remote_addr = r.peer_buf;
    w.rkey = r.peer_rkey;
    w.flags.signaled = true;
    r.drv.post_send(q2, &w).unwrap();
    let linv = |id: u64, key: u32| {
        let mut i = SendWr::new(id, WrOpcode::LocalInv, vec![]);
        i.invalidate_rkey = key;
        i.flags.signaled = true;
        i
    };
    r.drv.post_send(q2, &linv(2, f)).unwrap();
    let ours = r.our_completions(2, 200_000);
    assert_eq!(
        ours.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect::<Vec<_>>(),
        vec![(1, WcStatus::Success, WcOpcode::RdmaWrite), (2, WcStatus::Success, WcOpcode::LocalInv)],
        "in order, LOCAL_INV after the WRITE's ACK"
    );
    assert_eq!(r.sys.borrow().peer.counters().rx_frames - rx_before, 3, "the WRITE's three packets, nothing for LOCAL_INV");

    // the Responder's copy: the peer's WRITE through the invalidated key, nothing written
    let shadow = r.mem.lock().unwrap().clone();
    {
        let mut w = SendWr::new(3, WrOpcode::RdmaWrite, vec![Sge { addr: r.peer_buf, length: 512, lkey: r.peer_rkey }]);
        w.remote_addr = r.src + (1 << 20) + 4096;
        w.rkey = f;
        let pq = r.peer_qpn;
        r.sys.borrow_mut().peer.post_send(pq, w).unwrap();
    }
    let pw = r.wait_peer_completions(1, 200_000);
    assert_eq!(pw.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), vec![(3, WcStatus::RemAccessErr)]);
    assert!(r.mem.lock().unwrap().read(r.src, 1 << 21).unwrap() == shadow.read(r.src, 1 << 21).unwrap(), "nothing written");

    // WQE Check's copy: our SEND gathering from it
    let s = SendWr::new(4, WrOpcode::Send, vec![Sge { addr: r.src + (1 << 20), length: 64, lkey: f }]);
    r.drv.post_send(q3, &s).unwrap();
    let ours = r.our_completions(1, 100_000);
    assert_eq!(ours.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), vec![(4, WcStatus::LocProtErr)]);

    // our ordinary MR: LOC_QP_OP_ERR, the WQE behind flushed, the MR untouched
    let lkey = r.lkey;
    r.drv.post_send(q4, &linv(5, lkey)).unwrap();
    r.drv.post_send(q4, &w).unwrap();
    let ours = r.our_completions(2, 100_000);
    assert_eq!(
        ours.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        vec![(5, WcStatus::LocQpOpErr), (1, WcStatus::WrFlushErr)]
    );
    let (q6, _) = r.add_qp_pair_with(1024, 0x700, 0x800, cap, Cq(0));
    r.drv.post_send(q6, &w).unwrap();
    let ours = r.our_completions(1, 200_000);
    assert_eq!(ours.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), vec![(1, WcStatus::Success)], "the MR still serves");
}

/// The rig of the window tests: at 1 MiB into our buffer, an MR of 64 KiB registered with MW_BIND and one
/// over the same bytes without it.
fn window_rig(name: &str) -> (sim::system::Rig, u64, u32, u32) {
    let dir = std::env::temp_dir().join(format!("rnic-access-{name}-{}", std::process::id()));
    let mut r = rig(1024, &dir);
    let base = r.src + (1 << 20);
    let mr = r.drv.reg_mr(Pd(1), base, 1 << 16, AccessFlags::ALL | AccessFlags::MW_BIND).unwrap();
    let plain = r.drv.reg_mr(Pd(1), base, 1 << 16, AccessFlags::ALL).unwrap();
    (r, base, mr, plain)
}

/// The `n`-th new QP pair of a window test (a failed access puts a pair in error).
fn new_pair(r: &mut sim::system::Rig, n: &mut u32) -> (u32, u32) {
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    *n += 1;
    r.add_qp_pair_with(1024, 0x1000 * *n, 0x1000 * *n + 0x800, cap, Cq(0))
}

/// The peer's WRITE or READ (`op`) of `len` bytes at our `va` through `rkey` on its QP `pq`: its completion status.
#[allow(clippy::too_many_arguments)]
fn peer_access(r: &mut sim::system::Rig, pq: u32, id: u64, op: WrOpcode, va: u64, rkey: u32, len: u32) -> WcStatus {
    let mut w = SendWr::new(id, op, vec![Sge { addr: r.peer_buf + 0x8000, length: len, lkey: r.peer_rkey }]);
    (w.remote_addr, w.rkey, w.flags.signaled) = (va, rkey, true);
    r.sys.borrow_mut().peer.post_send(pq, w).unwrap();
    let pw = r.wait_peer_completions(1, 200_000);
    assert_eq!(pw.len(), 1, "{pw:?}");
    pw[0].status
}

/// A type 1 memory window of ours (`Driver::alloc_mw`, `bind_mw`: a Key Cache entry of its own, in both
/// copies): the peer's WRITE and READ through its rkey inside the window land and return our bytes; a WRITE that
/// runs past the window's end (inside the MR), a READ through a window bound for remote write only, the rkey the
/// window had before its last bind, and the rkey of an unbound window are each NAKed remote access error with
/// not one byte of our host memory changed; the window's key is no lkey (our SEND from it: LOC_PROT_ERR in WQE
/// Check); the MR under a bound window is not deregistered.
#[test]
fn our_type_1_window_grants_its_range_and_rights_only() {
    let (mut r, base, mr, plain) = window_rig("mw");
    let mut n = 0u32;
    let mut pair = |r: &mut sim::system::Rig| new_pair(r, &mut n);
    let (q1, p1) = pair(&mut r);
    let mw = r.drv.alloc_mw(Pd(1)).unwrap();
    let rw = AccessFlags(AccessFlags::REMOTE_WRITE.0 | AccessFlags::REMOTE_READ.0);
    assert!(r.drv.bind_mw(q1, mw, plain, base + 4096, 4096, rw).is_err(), "an MR without MW_BIND");
    assert!(r.drv.bind_mw(q1, mw, mr, base + 0xF000, 8192, rw).is_err(), "a window outside its MR");
    let mut key = r.drv.bind_mw(q1, mw, mr, base + 4096, 4096, rw).unwrap();
    assert!(r.drv.dereg_mr(mr).is_err(), "the MR under a bound window");
    let peer = peer_access;
    let theirs = r.sys.borrow().peer.mem().read(r.peer_buf + 0x8000, 2000).unwrap();
    assert_eq!(peer(&mut r, p1, 1, WrOpcode::RdmaWrite, base + 4096 + 100, key, 2000), WcStatus::Success);
    assert_eq!(r.mem.lock().unwrap().read(base + 4096 + 100, 2000).unwrap(), theirs, "the WRITE through the window");
    assert_eq!(peer(&mut r, p1, 2, WrOpcode::RdmaRead, base + 8192 - 300, key, 300), WcStatus::Success);
    let ours = r.mem.lock().unwrap().read(base + 8192 - 300, 300).unwrap();
    assert_eq!(r.sys.borrow().peer.mem().read(r.peer_buf + 0x8000, 300).unwrap(), ours, "the READ through the window");

    // each bad access on a QP pair of its own (the NAK puts both in error), nothing written
    let cases = [
        ("a WRITE 32 bytes past the window's end, inside the MR", WrOpcode::RdmaWrite, base + 8192 - 32, false, rw),
        ("the rkey from before the last bind", WrOpcode::RdmaWrite, base + 4096, true, rw),
        ("a READ through a window bound for remote write only", WrOpcode::RdmaRead, base + 4096, false, AccessFlags::REMOTE_WRITE),
    ];
    for (i, (what, op, va, old, acc)) in cases.into_iter().enumerate() {
        let (q, p) = pair(&mut r);
        let before = key;
        key = r.drv.bind_mw(q, key, mr, base + 4096, 4096, acc).unwrap();
        let shadow = r.mem.lock().unwrap().clone();
        let st = peer(&mut r, p, 10 + i as u64, op, va, if old { before } else { key }, 64);
        assert_eq!(st, WcStatus::RemAccessErr, "{what}");
        assert!(r.mem.lock().unwrap().read(r.src, 2 << 20).unwrap() == shadow.read(r.src, 2 << 20).unwrap(), "{what}: nothing written");
    }
    // the window's key as an lkey: none (WQE Check's copy)
    let (q, _) = pair(&mut r);
    r.drv.post_send(q, &SendWr::new(20, WrOpcode::Send, vec![Sge { addr: base + 4096, length: 64, lkey: key }])).unwrap();
    let ours = r.our_completions(1, 100_000);
    assert_eq!(ours.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(), vec![(20, WcStatus::LocProtErr)], "a window is no lkey");
    // unbound: its rkey opens nothing; then window and MR go
    let (q, p) = pair(&mut r);
    let k0 = r.drv.bind_mw(q, key, 0, 0, 0, rw).unwrap();
    let shadow = r.mem.lock().unwrap().clone();
    assert_eq!(peer(&mut r, p, 30, WrOpcode::RdmaWrite, base + 4096, k0, 64), WcStatus::RemAccessErr, "an unbound window");
    assert!(r.mem.lock().unwrap().read(r.src, 2 << 20).unwrap() == shadow.read(r.src, 2 << 20).unwrap());
    r.drv.dealloc_mw(k0).unwrap();
    r.drv.dereg_mr(mr).unwrap();
}

/// A type 2 memory window of ours (`Driver::alloc_mw2`, a BIND_MW send WQE checked and written by WQE Check):
/// the bind completes with WC opcode BIND_MW; the peer's WRITE and READ through the new rkey on the binding QP
/// land; from another QP they are NAKed with no byte changed; the peer's SEND_WITH_INV naming the window
/// invalidates it (our receive: WITH_INV and the key) and its next WRITE is NAKed; bound again with its next
/// key, our LOCAL_INV invalidates it; a bind of a window already bound, or over an MR without MW_BIND,
/// completes MW_BIND_ERR.
#[test]
fn our_type_2_window_is_bound_by_a_wqe_and_invalidated() {
    let (mut r, base, mr, plain) = window_rig("mw2");
    let mut n = 0u32;
    let mut pair = |r: &mut sim::system::Rig| new_pair(r, &mut n);
    let w0 = r.drv.alloc_mw2(Pd(1)).unwrap();
    let next = rnic_driver::verbs::inc_rkey;
    let rw = AccessFlags(AccessFlags::REMOTE_WRITE.0 | AccessFlags::REMOTE_READ.0);
    let bind = |r: &mut sim::system::Rig, q: u32, id: u64, lkey: u32, key: u32| -> (WcStatus, WcOpcode) {
        let mut w = SendWr::new(id, WrOpcode::BindMw, vec![Sge { addr: base + 4096, length: 4096, lkey }]);
        (w.rkey, w.mw_access, w.flags.signaled) = (key, rw, true);
        r.drv.post_send(q, &w).unwrap();
        let c = r.our_completions(1, 100_000);
        assert_eq!((c.len(), c[0].wr_id), (1, id), "{c:?}");
        (c[0].status, c[0].opcode)
    };
    let peer = peer_access;
    let unchanged = |r: &sim::system::Rig, shadow: &testbench::model::HostMemory| {
        r.mem.lock().unwrap().read(r.src, 2 << 20).unwrap() == shadow.read(r.src, 2 << 20).unwrap()
    };
    let (q1, p1) = pair(&mut r);
    let k1 = next(w0);
    assert_eq!(bind(&mut r, q1, 1, mr, k1), (WcStatus::Success, WcOpcode::BindMw));
    let theirs = r.sys.borrow().peer.mem().read(r.peer_buf + 0x8000, 1000).unwrap();
    assert_eq!(peer(&mut r, p1, 2, WrOpcode::RdmaWrite, base + 4096 + 64, k1, 1000), WcStatus::Success);
    assert_eq!(r.mem.lock().unwrap().read(base + 4096 + 64, 1000).unwrap(), theirs, "the WRITE through the window");
    assert_eq!(peer(&mut r, p1, 3, WrOpcode::RdmaRead, base + 8192 - 100, k1, 100), WcStatus::Success);
    let (_, p2) = pair(&mut r);
    let shadow = r.mem.lock().unwrap().clone();
    assert_eq!(peer(&mut r, p2, 4, WrOpcode::RdmaWrite, base + 4096, k1, 64), WcStatus::RemAccessErr, "from another QP");
    assert!(unchanged(&r, &shadow), "nothing written from another QP");
    // the peer's SEND_WITH_INV naming it, on the binding QP
    r.drv.post_recv(q1, &RecvWr { wr_id: 5, sg_list: vec![Sge { addr: r.src + 0x8000, length: 1000, lkey: r.lkey }] }).unwrap();
    {
        let mut w = SendWr::new(6, WrOpcode::SendWithInv, vec![Sge { addr: r.peer_buf, length: 100, lkey: r.peer_rkey }]);
        (w.invalidate_rkey, w.flags.signaled) = (k1, true);
        r.sys.borrow_mut().peer.post_send(p1, w).unwrap();
    }
    assert_eq!(r.wait_peer_completions(1, 200_000)[0].status, WcStatus::Success);
    let c = r.our_completions(1, 100_000);
    assert_eq!((c[0].wr_id, c[0].status, c[0].invalidated_rkey), (5, WcStatus::Success, k1), "{c:?}");
    assert!(c[0].wc_flags.has(WcFlags::WITH_INV));
    let shadow = r.mem.lock().unwrap().clone();
    assert_eq!(peer(&mut r, p1, 7, WrOpcode::RdmaWrite, base + 4096, k1, 64), WcStatus::RemAccessErr, "after SEND_WITH_INV");
    assert!(unchanged(&r, &shadow));
    // free again: bound with its next key, then our LOCAL_INV
    let (q3, p3) = pair(&mut r);
    let k2 = next(k1);
    assert_eq!(bind(&mut r, q3, 8, mr, k2), (WcStatus::Success, WcOpcode::BindMw));
    assert_eq!(peer(&mut r, p3, 9, WrOpcode::RdmaWrite, base + 4096, k2, 64), WcStatus::Success);
    let mut inv = SendWr::new(10, WrOpcode::LocalInv, vec![]);
    (inv.invalidate_rkey, inv.flags.signaled) = (k2, true);
    r.drv.post_send(q3, &inv).unwrap();
    let c = r.our_completions(1, 100_000);
    assert_eq!((c[0].wr_id, c[0].status, c[0].opcode), (10, WcStatus::Success, WcOpcode::LocalInv));
    let shadow = r.mem.lock().unwrap().clone();
    assert_eq!(peer(&mut r, p3, 11, WrOpcode::RdmaWrite, base + 4096, k2, 64), WcStatus::RemAccessErr, "after LOCAL_INV");
    assert!(unchanged(&r, &shadow));
    // refusals: over an MR without MW_BIND; a window already bound
    let (q4, _) = pair(&mut r);
    assert_eq!(bind(&mut r, q4, 12, plain, next(k2)).0, WcStatus::MwBindErr, "an MR without MW_BIND");
    let (q5, _) = pair(&mut r);
    let k3 = next(k2);
    assert_eq!(bind(&mut r, q5, 13, mr, k3).0, WcStatus::Success);
    assert_eq!(bind(&mut r, q5, 14, mr, next(k3)).0, WcStatus::MwBindErr, "a window already bound");
}
